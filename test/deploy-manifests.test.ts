/**
 * The Kubernetes manifests in deploy/: rendered with the small kustomize renderer (no kubectl, no
 * network), validated against the Kubernetes and prometheus-operator schemas, checked for unknown
 * fields and cross-references, and their metric names against what the sidecar exports.
 * deploy/ci/validate-manifests.sh also compares `kubectl kustomize` output with this renderer's
 * (deploy/validate/kubectl-render.test.ts) where kubectl is installed.
 */
import { expose, createMetricsRegistry } from '../src/telemetry/exposition.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../src/telemetry/metrics.js';
import {
  crossReferences,
  exposedNames,
  typecheckFields,
  unknownMetrics,
  validateSchemas,
} from '../deploy/validate/checks.js';
import {
  SECRET_EXAMPLES,
  readManifests,
  renderAll,
  type Manifest,
} from '../deploy/validate/kustomize.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const rendered = renderAll(root);
const secretExample = SECRET_EXAMPLES.flatMap((file) => readManifests(join(root, file)));
const everything = [...[...rendered.values()].flat(), ...secretExample];
const find = (name: string, kind: string, objectName: string): Manifest =>
  structuredClone(
    rendered.get(name)!.find((d) => d.kind === kind && d.metadata.name === objectName)!,
  );

/** The pod spec of a parsed Deployment, for tests that poke at arbitrary fields of a copy. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed YAML, mutated freely in negative tests
const podSpec = (deployment: Manifest): any =>
  (deployment.spec as { template: { spec: unknown } }).template.spec;

describe('deploy/ manifests', () => {
  it('render to the expected objects', () => {
    const ids = (name: string) => rendered.get(name)!.map((d) => `${d.kind}/${d.metadata.name}`);
    // The component's objects carry the name of the app's Deployment.
    const withComponent = (app: string) => [
      `ConfigMap/${app}-oauth-sidecar`,
      `Deployment/${app}`,
      `NetworkPolicy/${app}-oauth-sidecar-egress`,
      `Service/${app}-oauth-sidecar-metrics`,
    ];
    expect(ids('base').sort()).toEqual(withComponent('legacy-app'));
    expect(ids('examples/your-app').sort()).toEqual(withComponent('price-reports'));
    expect(ids('examples/two-apps').sort()).toEqual(
      [...withComponent('curve-builder'), ...withComponent('price-reports')].sort(),
    );
    expect(ids('monitoring').sort()).toEqual([
      'ConfigMap/oauth-sidecar-dashboard',
      'PrometheusRule/oauth-sidecar',
      'ServiceMonitor/oauth-sidecar',
    ]);
    expect(ids('overlays/shared-gateway')).toContain('Deployment/oauth-sidecar-gateway');
    expect(ids('overlays/shared-gateway')).toContain('ServiceAccount/oauth-sidecar-gateway');
    expect(ids('examples/gateway-client').sort()).toEqual([
      'Deployment/curve-reports',
      'ServiceAccount/curve-reports',
    ]);
  });

  it('the shared gateway runs 3 replicas with STORE_URL from a Secret and egress to Redis', () => {
    const deployment = find('overlays/shared-gateway', 'Deployment', 'oauth-sidecar-gateway');
    expect((deployment.spec as { replicas: number }).replicas).toBe(3);
    const container = podSpec(deployment).containers[0];
    expect(container.env.find((e: { name: string }) => e.name === 'STORE_URL')).toEqual({
      name: 'STORE_URL',
      valueFrom: {
        secretKeyRef: { name: 'oauth-sidecar-token-store', key: 'url', optional: true },
      },
    });
    const policy = find('overlays/shared-gateway', 'NetworkPolicy', 'oauth-sidecar-gateway');
    const egress = (policy.spec as { egress: { ports: { port: number }[] }[] }).egress;
    expect(egress.flatMap((rule) => rule.ports.map((p) => p.port))).toContain(6379);
  });

  it('the optional Redis overlay adds a password-protected, non-persistent store only the gateway reaches', () => {
    const ids = rendered
      .get('overlays/shared-gateway-redis')!
      .map((d) => `${d.kind}/${d.metadata.name}`);
    expect(ids).toEqual(
      expect.arrayContaining([
        'Deployment/oauth-sidecar-gateway',
        'StatefulSet/oauth-sidecar-redis',
        'Service/oauth-sidecar-redis',
        'NetworkPolicy/oauth-sidecar-redis',
      ]),
    );
    const redis = find('overlays/shared-gateway-redis', 'StatefulSet', 'oauth-sidecar-redis');
    const args: string[] = podSpec(redis).containers[0].args;
    expect(args.join(' ')).toContain('--requirepass $(VALKEY_PASSWORD) --save  --appendonly no');
    const policy = find('overlays/shared-gateway-redis', 'NetworkPolicy', 'oauth-sidecar-redis');
    expect(policy.spec).toMatchObject({
      ingress: [
        {
          from: [
            { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'oauth-sidecar-gateway' } } },
          ],
        },
      ],
      egress: [],
    });
  });

  it('validate against the Kubernetes and prometheus-operator schemas', () => {
    expect(validateSchemas(everything)).toEqual([]);
  });

  it('contain no unknown fields (each document type-checked `satisfies` its API type)', () => {
    expect(typecheckFields(everything, root)).toEqual([]);
  });

  it('the Sentinel overlay sets STORE_MODE, the primary and the sentinels password from a Secret, and egress to 26379', () => {
    const name = 'overlays/shared-gateway-sentinel';
    expect(find(name, 'ConfigMap', 'oauth-sidecar-gateway').data).toMatchObject({
      STORE_MODE: 'sentinel',
      STORE_SENTINEL_PRIMARY: 'mymaster',
    });
    const env = podSpec(find(name, 'Deployment', 'oauth-sidecar-gateway')).containers[0].env as {
      name: string;
    }[];
    const byName = (n: string) => env.find((e) => e.name === n);
    expect(byName('STORE_SENTINEL_PASSWORD')).toEqual({
      name: 'STORE_SENTINEL_PASSWORD',
      valueFrom: { secretKeyRef: { name: 'oauth-sidecar-sentinel', key: 'password' } },
    });
    expect(byName('STORE_URL')).toBeDefined();
    const policy = find(name, 'NetworkPolicy', 'oauth-sidecar-gateway');
    const ports = (policy.spec as { egress: { ports: { port: number }[] }[] }).egress.flatMap((r) =>
      r.ports.map((p) => p.port),
    );
    expect(ports.sort((a, b) => a - b)).toEqual([53, 53, 443, 6379, 6443, 26379]);
  });

  describe('caller identity on the shared gateway (CALLER_AUTH=jwt)', () => {
    const gateways = [
      'overlays/shared-gateway',
      'overlays/shared-gateway-redis',
      'overlays/shared-gateway-sentinel',
    ];
    for (const name of gateways) {
      it(`${name}: callers verified against the cluster's keys, read with the gateway's own projected token and ca.crt`, () => {
        expect(find(name, 'ConfigMap', 'oauth-sidecar-gateway').data).toMatchObject({
          CALLER_AUTH: 'jwt',
          CALLER_JWT_ISSUER: 'https://kubernetes.default.svc.cluster.local',
          CALLER_JWT_JWKS_URL: 'https://kubernetes.default.svc/openid/v1/jwks',
          CALLER_RULES: expect.stringMatching(/^system:serviceaccount:\S+=\S+/),
        });
        const deployment = find(name, 'Deployment', 'oauth-sidecar-gateway');
        const pod = podSpec(deployment);
        expect(pod.serviceAccountName).toBe('oauth-sidecar-gateway');
        expect(pod.automountServiceAccountToken).toBe(false);
        const container = pod.containers[0];
        const value = (n: string) =>
          container.env.find((e: { name: string }) => e.name === n)?.value as string;
        expect(value('CALLER_JWT_BEARER_FILE')).toBe('/var/run/secrets/kube-api/token');
        expect(value('CALLER_JWT_CA_FILE')).toBe('/var/run/secrets/kube-api/ca.crt');
        expect(container.volumeMounts).toContainEqual({
          name: 'kube-api',
          mountPath: '/var/run/secrets/kube-api',
          readOnly: true,
        });
        const volume = pod.volumes.find((v: { name: string }) => v.name === 'kube-api');
        // No audience: the token is the API server's own, good for reading /openid/v1/jwks only
        // as far as RBAC allows (system:service-account-issuer-discovery).
        expect(volume.projected.sources).toEqual([
          { serviceAccountToken: { path: 'token', expirationSeconds: 3600 } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        ]);
        expect(find(name, 'ServiceAccount', 'oauth-sidecar-gateway')).toMatchObject({
          automountServiceAccountToken: false,
        });
        // The caller header is gone: names come from verified tokens.
        expect(JSON.stringify(rendered.get(name))).not.toContain('QUOTA_CALLER_HEADER');
      });
    }

    it('the example client sends a projected token for the gateway alone (audience oauth-sidecar, one hour)', () => {
      const deployment = find('examples/gateway-client', 'Deployment', 'curve-reports');
      const pod = podSpec(deployment);
      expect(pod.serviceAccountName).toBe('curve-reports');
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(
        (deployment.spec as { template: { metadata: { labels: Record<string, string> } } }).template
          .metadata.labels['oauth-sidecar/client'],
      ).toBe('true');
      expect(pod.volumes).toEqual([
        {
          name: 'oauth-sidecar-token',
          projected: {
            defaultMode: 288,
            sources: [
              {
                serviceAccountToken: {
                  path: 'token',
                  audience: 'oauth-sidecar',
                  expirationSeconds: 3600,
                },
              },
            ],
          },
        },
      ]);
      const container = pod.containers[0];
      expect(container.volumeMounts).toEqual([
        {
          name: 'oauth-sidecar-token',
          mountPath: '/var/run/secrets/oauth-sidecar',
          readOnly: true,
        },
      ]);
      expect(container.args.join('\n')).toContain(
        'curl -fsS -H "Authorization: Bearer $(cat /var/run/secrets/oauth-sidecar/token)"',
      );
      // The rule the gateway's example CALLER_RULES gives this service account.
      const rules = find('overlays/shared-gateway', 'ConfigMap', 'oauth-sidecar-gateway').data as {
        CALLER_RULES: string;
      };
      expect(rules.CALLER_RULES.split(';')[0]).toBe(
        'system:serviceaccount:curves:curve-reports=curve-reports',
      );
    });

    it('broken caller-auth wiring is caught', () => {
      const docs = rendered.get('overlays/shared-gateway')!.map((d) => structuredClone(d));
      const deployment = docs.find((d) => d.kind === 'Deployment')!;
      const pod = podSpec(deployment);
      const container = pod.containers[0];
      container.env.find((e: { name: string }) => e.name === 'CALLER_JWT_BEARER_FILE').value =
        '/var/run/secrets/kube-api/sa-token';
      container.volumeMounts.find((m: { name: string }) => m.name === 'kube-api').readOnly = false;
      const configMap = docs.find((d) => d.kind === 'ConfigMap')!;
      const data = configMap.data as Record<string, string>;
      data.CALLER_JWT_ISSUER = 'http://kubernetes.default.svc.cluster.local';
      data.QUOTA_CALLER_HEADER = 'x-caller';
      delete data.CALLER_RULES;
      const problems = crossReferences(docs, secretExample).join('\n');
      expect(problems).toContain('CALLER_JWT_BEARER_FILE=/var/run/secrets/kube-api/sa-token');
      expect(problems).toContain('volume kube-api does not project sa-token');
      expect(problems).toContain('mount read-only and without subPath');
      expect(problems).toContain('needs an https:// CALLER_JWT_ISSUER');
      expect(problems).toContain('without CALLER_RULES refuses every caller');
      expect(problems).toContain('QUOTA_CALLER_HEADER cannot be combined with CALLER_AUTH=jwt');
    });
  });

  it('agree with each other: selectors, ports, probes, Secret mounts, ConfigMaps, hardening', () => {
    for (const [name, docs] of rendered) {
      const others = everything.filter((d) => !docs.includes(d));
      expect(crossReferences(docs, others), name).toEqual([]);
    }
  });

  it('the ServiceMonitor scrapes both the sidecar and the gateway Services on their admin port', () => {
    const monitor = find('monitoring', 'ServiceMonitor', 'oauth-sidecar');
    const selector = (monitor.spec as { selector: { matchLabels: Record<string, string> } })
      .selector.matchLabels;
    const selected = everything
      .filter((d) => d.kind === 'Service')
      .filter((d) => Object.entries(selector).every(([k, v]) => d.metadata.labels?.[k] === v))
      .map((d) => d.metadata.name);
    // The gateway Service renders in both gateway overlays.
    expect([...new Set(selected)].sort()).toEqual([
      'curve-builder-oauth-sidecar-metrics',
      'legacy-app-oauth-sidecar-metrics',
      'oauth-sidecar-gateway',
      'price-reports-oauth-sidecar-metrics',
    ]);
  });

  it('the sidecar is native (initContainer, restartPolicy Always) in base and loopback-only', () => {
    const deployment = find('base', 'Deployment', 'legacy-app');
    const pod = podSpec(deployment);
    const sidecar = pod.initContainers.find((c: { name: string }) => c.name === 'oauth-sidecar');
    expect(sidecar.restartPolicy).toBe('Always');
    expect(find('base', 'ConfigMap', 'legacy-app-oauth-sidecar').data).toMatchObject({
      PROXY_LISTEN: '127.0.0.1:8080',
    });
    expect(
      find('overlays/shared-gateway', 'ConfigMap', 'oauth-sidecar-gateway').data,
    ).toMatchObject({ PROXY_LISTEN: '0.0.0.0:8080' });
  });

  it('the component adds the sidecar to a Deployment that is not ours and keeps everything of it', () => {
    const deployment = find('examples/your-app', 'Deployment', 'price-reports');
    const pod = podSpec(deployment);
    const names = (list: { name: string }[]) => list.map((item) => item.name);
    // First among the init containers: the app's own init containers may call the API through it.
    expect(names(pod.initContainers)).toEqual(['oauth-sidecar', 'fetch-templates']);
    expect(pod.initContainers[0].restartPolicy).toBe('Always');
    expect(names(pod.containers)).toEqual(['web']);
    expect(names(pod.volumes)).toEqual([
      'oauth-sidecar-credentials',
      'oauth-sidecar-tmp',
      'templates',
      'cache',
    ]);
    // Readable by the sidecar's uid 1000 whatever the pod's fsGroup (2000 here).
    expect(pod.volumes[0].secret.defaultMode).toBe(0o444);
    expect(pod.securityContext.fsGroup).toBe(2000);
    expect(deployment.spec).toMatchObject({
      replicas: 2,
      selector: { matchLabels: { app: 'price-reports' } },
      template: {
        metadata: {
          labels: {
            app: 'price-reports',
            'oauth-sidecar/injected': 'true',
            'oauth-sidecar/app': 'price-reports',
          },
        },
      },
    });
    // The Service and the NetworkPolicy select the pod through the label the patch adds.
    const docs = rendered.get('examples/your-app')!;
    expect(crossReferences(docs, secretExample)).toEqual([]);
    const unlabelled = structuredClone(docs);
    const template = (
      unlabelled.find((d) => d.kind === 'Deployment')!.spec as never as {
        template: { metadata: { labels: Record<string, string> } };
      }
    ).template;
    delete template.metadata.labels['oauth-sidecar/injected'];
    expect(crossReferences(unlabelled, secretExample).join('\n')).toMatch(
      /NetworkPolicy\/price-reports-oauth-sidecar-egress: selector matches no/,
    );
  });

  describe('metric names in alerts and the dashboard', () => {
    let known: Set<string>;
    beforeAll(async () => {
      const registry = createMetricsRegistry();
      // As a sidecar with a token store and tracing configured exports them (those two only then).
      const metrics = createMetrics({ registry });
      metrics.bindStoreState({ status: () => ({ up: true }) });
      metrics.tracingSpansDropped().inc({ reason: 'queue_full' }, 0);
      // As a gateway with CALLER_AUTH=jwt exports them.
      metrics.callerAuth({ ageSeconds: () => 0 });
      known = exposedNames((await expose(registry, undefined)).body);
    });

    it('all exist in the sidecar exposition', () => {
      expect(known.has('oauth_sidecar_token_ready')).toBe(true);
      expect(known.has('oauth_sidecar_upstream_request_duration_seconds_bucket')).toBe(true);
      expect(unknownMetrics(everything, known)).toEqual([]);
    });

    it('every runbook_url starts with the base of the runbook ConfigMap', () => {
      const rule = find('monitoring', 'PrometheusRule', 'oauth-sidecar');
      const urls = JSON.stringify(rule.spec).match(/"runbook_url":"[^"]*"/g) ?? [];
      expect(urls.length).toBeGreaterThan(0);
      for (const url of urls) {
        expect(url).toMatch(
          /^"runbook_url":"https:\/\/github\.com\/example\/oauth-sidecar\/blob\/main\/docs\/runbook\.md#/,
        );
      }
    });

    it('the dashboard charts the token store and dropped spans', () => {
      const dashboard = JSON.stringify(
        find('monitoring', 'ConfigMap', 'oauth-sidecar-dashboard').data,
      );
      expect(dashboard).toContain('oauth_sidecar_token_store_up');
      expect(dashboard).toContain('oauth_sidecar_tracing_spans_dropped_total');
    });

    it('a misspelled metric name is caught', () => {
      const rule = find('monitoring', 'PrometheusRule', 'oauth-sidecar');
      const groups = (rule.spec as { groups: { rules: { expr: string }[] }[] }).groups;
      groups[0]!.rules[0]!.expr = 'oauth_sidecar_token_expiry_seconds < 60';
      expect(unknownMetrics([rule], known)).toEqual([
        expect.stringContaining('unknown metric oauth_sidecar_token_expiry_seconds'),
      ]);
    });
  });

  describe('negative checks on in-memory copies', () => {
    it('a misspelled field is caught by the type check (and missed by schema validation)', () => {
      const deployment = find('base', 'Deployment', 'legacy-app');
      const pod = podSpec(deployment);
      const sidecar = pod.initContainers[0];
      sidecar.readinesProbe = sidecar.readinessProbe;
      delete sidecar.readinessProbe;
      expect(validateSchemas([deployment])).toEqual([]);
      const problems = typecheckFields([deployment], root);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(/^Deployment\/legacy-app: .*readinesProbe/);
    });

    it('a wrong type or enum is caught by schema validation', () => {
      const service = find('base', 'Service', 'legacy-app-oauth-sidecar-metrics');
      (service.spec as { ports: { protocol: string }[] }).ports[0]!.protocol = 'HTTP';
      expect(validateSchemas([service])).toEqual([expect.stringContaining('protocol')]);
    });

    it('broken cross-references are caught', () => {
      const docs = rendered.get('base')!.map((d) => structuredClone(d));
      const deployment = docs.find((d) => d.kind === 'Deployment')!;
      const pod = podSpec(deployment);
      const sidecar = pod.initContainers[0];
      sidecar.env[1].value = '/var/run/secrets/oauth-sidecar/client_secret';
      sidecar.volumeMounts[0].subPath = 'client-id';
      sidecar.livenessProbe.httpGet.port = 'metrics';
      const service = docs.find((d) => d.kind === 'Service')!;
      (service.spec as { ports: { targetPort: string }[] }).ports[0]!.targetPort = 'admn';
      const configMap = docs.find((d) => d.kind === 'ConfigMap')!;
      (configMap.data as Record<string, string>).PROXY_LISTEN = '0.0.0.0:8080';
      (configMap.data as Record<string, string>).UPSTREAM_BASEURL = 'https://example.com';
      (configMap.data as Record<string, string>).TOKEN_STORE_URL = 'redis://:pw@redis:6379';
      (configMap.data as Record<string, string>).STORE_URL = 'redis://:pw@redis:6379';
      const problems = crossReferences(docs, secretExample).join('\n');
      expect(problems).toContain('CLIENT_SECRET_FILE=/var/run/secrets/oauth-sidecar/client_secret');
      expect(problems).toContain('subPath');
      expect(problems).toContain('livenessProbe port metrics');
      expect(problems).toContain('targetPort admn');
      expect(problems).toContain('loopback');
      expect(problems).toContain('UPSTREAM_BASEURL is not a configuration variable');
      expect(problems).toContain('TOKEN_STORE_URL must come from a Secret');
      expect(problems).toContain(' STORE_URL must come from a Secret');
    });
  });
});
