/**
 * Checks on rendered manifests, each returning the problems it found (empty: fine):
 * schema validation (kubernetes-models), unknown fields (a `satisfies` type check), cross-references
 * between objects, and the metric names used by alerts and the dashboard.
 */
import { dirname, join, posix } from 'node:path';
import ts from 'typescript';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { KNOWN_VARIABLES } from '../../src/config/unknown-settings.js';
import type { Manifest } from './manifest.js';

interface KindInfo {
  model: new (data: never) => { validate(): void };
  /** Module and interface for the `satisfies` check. */
  types: [module: string, iface: string];
}

const KINDS: Record<string, KindInfo> = {
  'v1/ConfigMap': { model: ConfigMap, types: ['kubernetes-models/v1/ConfigMap', 'IConfigMap'] },
  'v1/Secret': { model: Secret, types: ['kubernetes-models/v1/Secret', 'ISecret'] },
  'v1/Service': { model: Service, types: ['kubernetes-models/v1/Service', 'IService'] },
  'v1/ServiceAccount': {
    model: ServiceAccount,
    types: ['kubernetes-models/v1/ServiceAccount', 'IServiceAccount'],
  },
  'apps/v1/Deployment': {
    model: Deployment,
    types: ['kubernetes-models/apps/v1/Deployment', 'IDeployment'],
  },
  'apps/v1/StatefulSet': {
    model: StatefulSet,
    types: ['kubernetes-models/apps/v1/StatefulSet', 'IStatefulSet'],
  },
  'networking.k8s.io/v1/NetworkPolicy': {
    model: NetworkPolicy,
    types: ['kubernetes-models/networking.k8s.io/v1/NetworkPolicy', 'INetworkPolicy'],
  },
  'policy/v1/PodDisruptionBudget': {
    model: PodDisruptionBudget,
    types: ['kubernetes-models/policy/v1/PodDisruptionBudget', 'IPodDisruptionBudget'],
  },
  'monitoring.coreos.com/v1/ServiceMonitor': {
    model: ServiceMonitor,
    types: [
      '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor',
      'IServiceMonitor',
    ],
  },
  'monitoring.coreos.com/v1/PrometheusRule': {
    model: PrometheusRule,
    types: [
      '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule',
      'IPrometheusRule',
    ],
  },
};

const idOf = (doc: Manifest): string => `${doc.kind}/${doc.metadata.name}`;
const kindKey = (doc: Manifest): string => `${doc.apiVersion}/${doc.kind}`;

/** Types, required fields and enums of each document (kubernetes-models; unknown fields pass). */
export function validateSchemas(docs: Manifest[]): string[] {
  const problems: string[] = [];
  for (const doc of docs) {
    const info = KINDS[kindKey(doc)];
    if (info === undefined) {
      problems.push(`${idOf(doc)}: no schema known for ${kindKey(doc)}`);
      continue;
    }
    try {
      new info.model(structuredClone(doc) as never).validate();
    } catch (error) {
      problems.push(`${idOf(doc)}: ${(error as Error).message}`);
    }
  }
  return problems;
}

/**
 * Unknown (e.g. misspelled) fields: each document becomes an object literal `satisfies IKind`,
 * type-checked in memory, so excess property checks reject any field the API does not have.
 */
export function typecheckFields(docs: Manifest[], projectRoot: string): string[] {
  const fileName = join(projectRoot, 'deploy/validate/__manifests_typecheck__.ts');
  const lines: string[] = [];
  const imported = new Set<string>();
  const docAtLine: { line: number; id: string }[] = [];
  const problems: string[] = [];
  for (const doc of docs) {
    const info = KINDS[kindKey(doc)];
    if (info === undefined) continue;
    const [module, iface] = info.types;
    if (!imported.has(iface)) lines.push(`import type { ${iface} } from '${module}';`);
    imported.add(iface);
  }
  docs.forEach((doc, index) => {
    const info = KINDS[kindKey(doc)];
    if (info === undefined) return;
    docAtLine.push({ line: lines.length, id: idOf(doc) });
    const literal = JSON.stringify(doc, null, 2).split('\n');
    lines.push(`export const doc${index} = ${literal[0]}`, ...literal.slice(1));
    lines[lines.length - 1] += ` satisfies ${info.types[1]};`;
  });
  const source = lines.join('\n');

  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (name, language, ...rest) =>
    name === fileName
      ? ts.createSourceFile(name, source, language)
      : getSourceFile.call(host, name, language, ...rest);
  host.fileExists = (name) => name === fileName || fileExists.call(host, name);
  host.readFile = (name) => (name === fileName ? source : readFile.call(host, name));
  const program = ts.createProgram([fileName], options, host);
  for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (diagnostic.file?.fileName !== fileName || diagnostic.start === undefined) {
      problems.push(message);
      continue;
    }
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    const owner = docAtLine.filter((entry) => entry.line <= line).pop();
    const text = source.split('\n')[line]?.trim() ?? '';
    problems.push(`${owner?.id ?? '?'}: ${message.split('\n')[0]} (at ${text})`);
  }
  return problems;
}

interface Container {
  name: string;
  ports?: { name?: string; containerPort: number }[];
  env?: {
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
  }[];
  envFrom?: { configMapRef?: { name: string } }[];
  volumeMounts?: { name: string; mountPath: string; subPath?: string; readOnly?: boolean }[];
  restartPolicy?: string;
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  resources?: { requests?: Record<string, unknown>; limits?: Record<string, unknown> };
  securityContext?: {
    readOnlyRootFilesystem?: boolean;
    allowPrivilegeEscalation?: boolean;
    runAsNonRoot?: boolean;
    runAsUser?: number;
    capabilities?: { drop?: string[] };
  };
}
interface Probe {
  httpGet?: { path?: string; port: string | number };
  tcpSocket?: { port: string | number };
}
interface Volume {
  name: string;
  secret?: { secretName: string; items?: { key: string; path: string }[] };
  emptyDir?: object;
  projected?: {
    sources: {
      serviceAccountToken?: { path: string; audience?: string; expirationSeconds?: number };
      configMap?: { name: string; items?: { key: string; path: string }[] };
      secret?: { name: string; items?: { key: string; path: string }[] };
    }[];
  };
}
interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: {
    initContainers?: Container[];
    containers: Container[];
    volumes?: Volume[];
    terminationGracePeriodSeconds?: number;
    securityContext?: {
      runAsNonRoot?: boolean;
      runAsUser?: number;
      seccompProfile?: { type: string };
    };
  };
}

/**
 * The settings a ConfigMap may hold, for typos: the schema's own variables (one list, derived from
 * `FIELDS`), less the inline credentials, which belong in a Secret.
 */
export const KNOWN_ENV: ReadonlySet<string> = new Set(
  [...KNOWN_VARIABLES].filter((name) => name !== 'CLIENT_ID' && name !== 'CLIENT_SECRET'),
);

/**
 * Egress the workloads may have: DNS, HTTPS (API and token endpoint; the Kubernetes API server for
 * the callers' keys), the API server's own port 6443 (egress judged after the Service address is
 * translated), Redis (the token store) and Redis Sentinel (a Sentinel-fronted store).
 */
export const ALLOWED_EGRESS_PORTS = new Set([53, 443, 6443, 6379, 26379]);

/** Workloads whose pod templates the checks follow. */
const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet']);
export const SIDECAR_CONTAINER = 'oauth-sidecar';

const matches = (selector: Record<string, string>, labels: Record<string, string> = {}): boolean =>
  Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([key, value]) => labels[key] === value);

function portOf(listen: string | undefined): number | undefined {
  if (listen === undefined) return undefined;
  return Number(listen.slice(listen.lastIndexOf(':') + 1));
}

/**
 * Cross-references: selectors vs pod labels, probe and Service ports vs named container ports,
 * Secret volume vs mount vs CLIENT_*_FILE, ConfigMap vs listen ports, hardening of every container.
 * `others` are objects rendered elsewhere (e.g. the Secret example, Services for the ServiceMonitor).
 */
export function crossReferences(docs: Manifest[], others: Manifest[] = []): string[] {
  const problems: string[] = [];
  const all = [...docs, ...others];
  const byKind = (kind: string): Manifest[] => all.filter((doc) => doc.kind === kind);
  const pods = all
    .filter((doc) => WORKLOAD_KINDS.has(doc.kind))
    .map((doc) => ({
      id: idOf(doc),
      template: (doc.spec as { template: PodTemplate }).template,
    }));
  const podContainers = (template: PodTemplate): Container[] => [
    ...(template.spec.initContainers ?? []),
    ...template.spec.containers,
  ];
  const podsSelectedBy = (selector: Record<string, string>) =>
    pods.filter((pod) => matches(selector, pod.template.metadata.labels));

  for (const doc of docs.filter((d) => WORKLOAD_KINDS.has(d.kind))) {
    const id = idOf(doc);
    const spec = doc.spec as {
      selector: { matchLabels: Record<string, string> };
      template: PodTemplate;
    };
    const pod = spec.template.spec;
    if (!matches(spec.selector.matchLabels, spec.template.metadata.labels)) {
      problems.push(`${id}: selector does not match the pod template's labels`);
    }
    if (!((pod.terminationGracePeriodSeconds ?? 30) > 10)) {
      problems.push(`${id}: terminationGracePeriodSeconds must exceed the sidecar's 10 s drain`);
    }
    const podSecurity = pod.securityContext;
    if (podSecurity?.seccompProfile?.type !== 'RuntimeDefault') {
      problems.push(`${id}: pod securityContext needs seccompProfile RuntimeDefault`);
    }
    const volumes = new Map((pod.volumes ?? []).map((volume) => [volume.name, volume]));
    problems.push(...portClashes(id, podContainers(spec.template)));
    for (const container of podContainers(spec.template)) {
      const where = `${id} container ${container.name}`;
      const sc = container.securityContext;
      // The container's own settings win over the pod's (as the kubelet applies them).
      if ((sc?.runAsNonRoot ?? podSecurity?.runAsNonRoot) !== true) {
        problems.push(`${where}: runAsNonRoot (pod or container securityContext)`);
      }
      const uid = sc?.runAsUser ?? podSecurity?.runAsUser;
      if (container.name === SIDECAR_CONTAINER ? uid !== 1000 : uid === undefined || uid === 0) {
        problems.push(`${where}: runAsUser (1000 for the sidecar, the image's user)`);
      }
      if (sc?.readOnlyRootFilesystem !== true) problems.push(`${where}: readOnlyRootFilesystem`);
      if (sc?.allowPrivilegeEscalation !== false)
        problems.push(`${where}: allowPrivilegeEscalation`);
      if (!(sc?.capabilities?.drop ?? []).includes('ALL')) problems.push(`${where}: drop ALL`);
      if (
        container.resources?.requests?.memory === undefined ||
        container.resources.limits?.memory === undefined
      ) {
        problems.push(`${where}: memory request and limit`);
      }
      for (const mount of container.volumeMounts ?? []) {
        if (!volumes.has(mount.name))
          problems.push(`${where}: mount of unknown volume ${mount.name}`);
      }
      for (const variable of container.env ?? []) {
        const ref = variable.valueFrom?.secretKeyRef;
        if (ref === undefined) continue;
        const secret = all.find((d) => d.kind === 'Secret' && d.metadata.name === ref.name);
        const keys = Object.keys({
          ...(secret?.data as object),
          ...(secret?.stringData as object),
        });
        if (secret === undefined)
          problems.push(`${where}: ${variable.name}: Secret ${ref.name} not found`);
        else if (!keys.includes(ref.key))
          problems.push(`${where}: ${variable.name}: Secret ${ref.name} has no key ${ref.key}`);
      }
      const portNames = new Set((container.ports ?? []).map((port) => port.name));
      const portNumbers = new Set((container.ports ?? []).map((port) => port.containerPort));
      for (const kind of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const) {
        const probe = container[kind];
        const port = probe?.httpGet?.port ?? probe?.tcpSocket?.port;
        if (port === undefined) continue;
        if (typeof port === 'string' ? !portNames.has(port) : !portNumbers.has(port)) {
          problems.push(`${where}: ${kind} port ${port} is not a port of the container`);
        }
      }
      if (container.name === SIDECAR_CONTAINER) {
        problems.push(...checkSidecar(where, container, spec.template, volumes, all));
      }
    }
  }

  for (const doc of docs.filter((d) => d.kind === 'Service')) {
    const spec = doc.spec as {
      selector: Record<string, string>;
      ports: { name: string; port: number; targetPort?: string | number }[];
    };
    const selected = podsSelectedBy(spec.selector);
    if (selected.length === 0) problems.push(`${idOf(doc)}: selector matches no Deployment's pods`);
    for (const pod of selected) {
      const ports = podContainers(pod.template).flatMap((c) => c.ports ?? []);
      for (const port of spec.ports) {
        const target = port.targetPort ?? port.port;
        const found =
          typeof target === 'string'
            ? ports.some((p) => p.name === target)
            : ports.some((p) => p.containerPort === target);
        if (!found) problems.push(`${idOf(doc)}: targetPort ${target} is not a port of ${pod.id}`);
      }
    }
  }

  for (const doc of docs.filter(
    (d) => d.kind === 'NetworkPolicy' || d.kind === 'PodDisruptionBudget',
  )) {
    const spec = doc.spec as {
      podSelector?: { matchLabels: Record<string, string> };
      selector?: { matchLabels: Record<string, string> };
      ingress?: { ports?: { port?: string | number }[] }[];
      egress?: { ports?: { port?: string | number; protocol?: string }[]; to?: unknown[] }[];
    };
    const selector = (spec.podSelector ?? spec.selector)?.matchLabels ?? {};
    const selected = podsSelectedBy(selector);
    if (selected.length === 0) problems.push(`${idOf(doc)}: selector matches no Deployment's pods`);
    for (const rule of spec.ingress ?? []) {
      for (const { port } of rule.ports ?? []) {
        if (typeof port !== 'string') continue;
        for (const pod of selected) {
          if (
            !podContainers(pod.template).some((c) => (c.ports ?? []).some((p) => p.name === port))
          ) {
            problems.push(`${idOf(doc)}: ingress port ${port} is not a named port of ${pod.id}`);
          }
        }
      }
    }
    for (const rule of spec.egress ?? []) {
      if ((rule.ports ?? []).length === 0) problems.push(`${idOf(doc)}: egress rule without ports`);
      for (const { port } of rule.ports ?? []) {
        if (typeof port !== 'number' || !ALLOWED_EGRESS_PORTS.has(port))
          problems.push(`${idOf(doc)}: egress to port ${port}`);
      }
    }
  }

  for (const doc of docs.filter((d) => d.kind === 'ServiceMonitor')) {
    const spec = doc.spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port?: string }[];
    };
    const services = byKind('Service').filter((svc) =>
      matches(spec.selector.matchLabels, svc.metadata.labels),
    );
    if (services.length === 0) problems.push(`${idOf(doc)}: selects no Service`);
    for (const svc of services) {
      const names = (svc.spec as { ports: { name?: string }[] }).ports.map((port) => port.name);
      for (const endpoint of spec.endpoints) {
        if (endpoint.port === undefined || !names.includes(endpoint.port)) {
          problems.push(
            `${idOf(doc)}: endpoint port ${endpoint.port} is not a port of ${idOf(svc)}`,
          );
        }
      }
    }
  }

  for (const doc of docs.filter(
    (d) => d.kind === 'ConfigMap' && !d.metadata.name.endsWith('-dashboard'),
  )) {
    for (const key of Object.keys((doc.data as Record<string, string>) ?? {})) {
      if (!KNOWN_ENV.has(key))
        problems.push(`${idOf(doc)}: ${key} is not a configuration variable`);
    }
  }
  return problems;
}

/** Container ports of one pod: a number or a name declared by two containers clash. */
function portClashes(id: string, containers: Container[]): string[] {
  const problems: string[] = [];
  const seen = new Map<string | number, string>();
  for (const container of containers) {
    for (const port of container.ports ?? []) {
      for (const key of [port.containerPort, port.name]) {
        if (key === undefined) continue;
        const other = seen.get(key);
        if (other !== undefined && other !== container.name) {
          problems.push(
            `${id}: containers ${other} and ${container.name} both declare port ${key}`,
          );
        }
        seen.set(key, container.name);
      }
    }
  }
  return problems;
}

function checkSidecar(
  where: string,
  container: Container,
  template: PodTemplate,
  volumes: Map<string, Volume>,
  all: Manifest[],
): string[] {
  const problems: string[] = [];
  const native = (template.spec.initContainers ?? []).includes(container);
  if (native && container.restartPolicy !== 'Always') {
    problems.push(`${where}: a native sidecar needs restartPolicy: Always`);
  }
  const probes: [keyof Container, string][] = [
    ['startupProbe', '/readyz'],
    ['livenessProbe', '/healthz'],
    ['readinessProbe', '/readyz'],
  ];
  for (const [kind, path] of probes) {
    if ((container[kind] as Probe | undefined)?.httpGet?.path !== path) {
      problems.push(`${where}: ${kind} must be GET ${path} on the admin port`);
    }
  }

  const env = new Map<string, string | undefined>();
  for (const { configMapRef } of container.envFrom ?? []) {
    const configMap = all.find(
      (d) => d.kind === 'ConfigMap' && d.metadata.name === configMapRef?.name,
    );
    if (configMap === undefined)
      problems.push(`${where}: envFrom ConfigMap ${configMapRef?.name} not found`);
    else
      for (const [key, value] of Object.entries(configMap.data as Record<string, string>))
        env.set(key, value);
  }
  for (const variable of container.env ?? []) env.set(variable.name, variable.value);
  // The store URL (or its alias) may hold a password: only ever from a Secret.
  for (const name of ['STORE_URL', 'TOKEN_STORE_URL']) {
    const storeUrl = (container.env ?? []).find((v) => v.name === name);
    if (env.has(name) && storeUrl?.valueFrom?.secretKeyRef === undefined) {
      problems.push(`${where}: ${name} must come from a Secret (secretKeyRef), not a literal`);
    }
  }

  // The listen ports are ports of the container, and the probes ask the admin listener.
  const numbers = new Map((container.ports ?? []).map((port) => [port.name, port.containerPort]));
  const proxyPort = portOf(env.get('PROXY_LISTEN') ?? '127.0.0.1:8080');
  if (!(container.ports ?? []).some((port) => port.containerPort === proxyPort)) {
    problems.push(`${where}: PROXY_LISTEN port ${proxyPort} is not a port of the container`);
  }
  const adminPort = portOf(env.get('ADMIN_LISTEN') ?? '0.0.0.0:9090');
  for (const [kind] of probes) {
    const port = (container[kind] as Probe | undefined)?.httpGet?.port;
    const number = typeof port === 'string' ? numbers.get(port) : port;
    if (number !== adminPort) {
      problems.push(`${where}: ${kind} port ${port} is not ADMIN_LISTEN's port ${adminPort}`);
    }
  }
  const proxyHost = (env.get('PROXY_LISTEN') ?? '127.0.0.1:8080').replace(/:\d+$/, '');
  if (native && proxyHost !== '127.0.0.1') {
    problems.push(
      `${where}: as a sidecar the proxy must listen on loopback (PROXY_LISTEN=${proxyHost})`,
    );
  }
  if (!env.get('UPSTREAM_BASE_URL')?.startsWith('https://')) {
    problems.push(`${where}: UPSTREAM_BASE_URL must be https://`);
  }

  // Credentials: CLIENT_*_FILE -> a read-only directory mount (no subPath: rotation needs the
  // ..data symlink swap) -> a Secret volume whose items -> keys of the Secret.
  for (const [variable, key] of [
    ['CLIENT_ID_FILE', 'client-id'],
    ['CLIENT_SECRET_FILE', 'client-secret'],
  ] as const) {
    const file = env.get(variable);
    if (file === undefined) {
      problems.push(`${where}: ${variable} is not set`);
      continue;
    }
    const mount = (container.volumeMounts ?? []).find((m) => m.mountPath === posix.dirname(file));
    const volume = mount && volumes.get(mount.name);
    if (mount === undefined || volume?.secret === undefined) {
      problems.push(`${where}: ${variable}=${file} is not in a Secret volume mount`);
      continue;
    }
    if (mount.subPath !== undefined)
      problems.push(`${where}: Secret mounted with subPath never updates`);
    if (mount.readOnly !== true) problems.push(`${where}: Secret mount must be readOnly`);
    const items = volume.secret.items ?? [{ key, path: key }];
    const item = items.find((i) => i.path === posix.basename(file));
    if (item === undefined) {
      problems.push(`${where}: ${variable}=${file}: no item of the Secret volume has that path`);
      continue;
    }
    const secret = all.find(
      (d) => d.kind === 'Secret' && d.metadata.name === volume.secret?.secretName,
    );
    if (secret === undefined) {
      problems.push(`${where}: Secret ${volume.secret.secretName} not found`);
    } else {
      const keys = Object.keys({ ...(secret.data as object), ...(secret.stringData as object) });
      if (!keys.includes(item.key)) problems.push(`${where}: Secret has no key ${item.key}`);
    }
  }
  problems.push(...checkCallerAuth(where, container, env, volumes));
  const tmp = (container.volumeMounts ?? []).find((m) => m.mountPath === '/tmp');
  if (tmp === undefined || volumes.get(tmp.name)?.emptyDir === undefined) {
    problems.push(`${where}: /tmp must be an emptyDir (read-only root filesystem)`);
  }
  return problems;
}

/**
 * Caller identity (CALLER_AUTH=jwt): an https issuer, rules, no caller header beside it, and the
 * JWKS reader's token and CA files in read-only mounts of volumes that project them (the token
 * from a serviceAccountToken source, so the kubelet rotates it).
 */
function checkCallerAuth(
  where: string,
  container: Container,
  env: Map<string, string | undefined>,
  volumes: Map<string, Volume>,
): string[] {
  if (env.get('CALLER_AUTH') !== 'jwt') return [];
  const problems: string[] = [];
  if (!env.get('CALLER_JWT_ISSUER')?.startsWith('https://')) {
    problems.push(`${where}: CALLER_AUTH=jwt needs an https:// CALLER_JWT_ISSUER`);
  }
  if ((env.get('CALLER_RULES') ?? '') === '') {
    problems.push(`${where}: CALLER_AUTH=jwt without CALLER_RULES refuses every caller`);
  }
  if (env.has('QUOTA_CALLER_HEADER')) {
    problems.push(`${where}: QUOTA_CALLER_HEADER cannot be combined with CALLER_AUTH=jwt`);
  }
  for (const variable of ['CALLER_JWT_BEARER_FILE', 'CALLER_JWT_CA_FILE']) {
    const file = env.get(variable);
    if (file === undefined) continue;
    const mount = (container.volumeMounts ?? []).find((m) => m.mountPath === posix.dirname(file));
    const volume = mount && volumes.get(mount.name);
    if (mount === undefined || volume === undefined) {
      problems.push(`${where}: ${variable}=${file} is not in a volume mount`);
      continue;
    }
    if (mount.subPath !== undefined || mount.readOnly !== true) {
      problems.push(`${where}: ${variable}: mount read-only and without subPath (it rotates)`);
    }
    const name = posix.basename(file);
    const sources = volume.projected?.sources ?? [];
    const provides = sources.some((source) =>
      variable === 'CALLER_JWT_BEARER_FILE'
        ? source.serviceAccountToken?.path === name
        : [...(source.configMap?.items ?? []), ...(source.secret?.items ?? [])].some(
            (item) => item.path === name,
          ),
    );
    if (!provides) {
      problems.push(
        `${where}: ${variable}=${file}: volume ${volume.name} does not project ${name}`,
      );
    }
  }
  return problems;
}

/** Every `oauth_sidecar_*` name in a PromQL expression. */
export function metricNamesIn(expr: string): string[] {
  return [...expr.matchAll(/\boauth_sidecar_[a-zA-Z0-9_]+/g)].map((m) => m[0]);
}

/**
 * Series names a Prometheus text exposition can produce: every sample name, and for each declared
 * histogram or summary its _bucket/_sum/_count series (absent until the first observation).
 */
export function exposedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const line of exposition.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      const [, name, kind] = type as unknown as [string, string, string];
      names.add(name);
      if (kind === 'histogram') names.add(`${name}_bucket`);
      if (kind === 'histogram' || kind === 'summary') {
        names.add(`${name}_sum`);
        names.add(`${name}_count`);
      }
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (sample) names.add(sample[1]!);
  }
  return names;
}

/** Metric names in alert expressions and dashboard queries that the sidecar does not export. */
export function unknownMetrics(docs: Manifest[], known: Set<string>): string[] {
  const problems: string[] = [];
  const check = (where: string, expr: string): void => {
    for (const name of metricNamesIn(expr)) {
      if (!known.has(name)) problems.push(`${where}: unknown metric ${name}`);
    }
  };
  for (const doc of docs.filter((d) => d.kind === 'PrometheusRule')) {
    const groups = (
      doc.spec as { groups: { rules: { alert?: string; record?: string; expr: string }[] }[] }
    ).groups;
    for (const rule of groups.flatMap((g) => g.rules))
      check(`${idOf(doc)} ${rule.alert ?? rule.record}`, rule.expr);
  }
  for (const doc of docs.filter(
    (d) => d.kind === 'ConfigMap' && d.metadata.name.endsWith('-dashboard'),
  )) {
    for (const [file, text] of Object.entries(doc.data as Record<string, string>)) {
      const walk = (node: unknown, path: string): void => {
        if (typeof node === 'string' && /^(expr|query|definition)$/.test(path.split('.').pop()!)) {
          check(`${idOf(doc)} ${file} ${path}`, node);
        } else if (node !== null && typeof node === 'object') {
          for (const [key, value] of Object.entries(node)) walk(value, `${path}.${key}`);
        }
      };
      walk(JSON.parse(text), '$');
    }
  }
  return problems;
}

/** Directory of this file's project root (deploy/validate/../..). */
export const projectRootFrom = (metaUrl: string): string =>
  dirname(dirname(dirname(new URL(metaUrl).pathname)));
