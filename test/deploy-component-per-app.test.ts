/**
 * The kustomize component once per app (deploy/README.md "One component per app"): two apps with
 * it in one namespace (deploy/examples/two-apps) render with no kind/namespace/name twice, each
 * app's Service and NetworkPolicy select its own pods, and an app already on 8080/9090 with a port
 * named `admin` (deploy/examples/curve-builder) moves the sidecar's ports without a clash.
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { crossReferences } from '../deploy/validate/checks.js';
import {
  SECRET_EXAMPLES,
  duplicateIds,
  readManifests,
  renderKustomization,
  type Manifest,
} from '../deploy/validate/kustomize.js';
import { tempDir } from './helpers/sidecar-process.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const deploy = join(root, 'deploy');
const secretExample = SECRET_EXAMPLES.flatMap((file) => readManifests(join(root, file)));
const render = renderKustomization;

interface Template {
  metadata: { labels: Record<string, string> };
  spec: { initContainers: Container[]; containers: Container[] };
}
interface Container {
  name: string;
  ports: { name: string; containerPort: number }[];
  startupProbe: { httpGet: { port: string } };
}
const template = (docs: Manifest[], name: string): Template =>
  (
    docs.find((d) => d.kind === 'Deployment' && d.metadata.name === name)!.spec as {
      template: Template;
    }
  ).template;
const selectorOf = (doc: Manifest): Record<string, string> =>
  doc.kind === 'Service'
    ? (doc.spec as { selector: Record<string, string> }).selector
    : (doc.spec as { podSelector: { matchLabels: Record<string, string> } }).podSelector
        .matchLabels;

/**
 * deploy/components and two app folders copied to a temp tree: `your-app` as it is and a second
 * app, your-app with its Deployment renamed; `component` may rewrite the component's kustomization.
 */
function twoAppsTree(component: (kustomization: Record<string, unknown>) => void): string[] {
  const tree = tempDir('component-per-app-');
  cpSync(join(deploy, 'components'), join(tree, 'components'), { recursive: true });
  const file = join(tree, 'components', 'oauth-sidecar', 'kustomization.yaml');
  const kustomization = parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  component(kustomization);
  writeFileSync(file, stringify(kustomization));
  cpSync(join(deploy, 'examples', 'your-app'), join(tree, 'examples', 'your-app'), {
    recursive: true,
  });
  cpSync(join(deploy, 'examples', 'your-app'), join(tree, 'examples', 'price-alerts'), {
    recursive: true,
  });
  const deployment = join(tree, 'examples', 'price-alerts', 'deployment.yaml');
  writeFileSync(
    deployment,
    readFileSync(deployment, 'utf8').replaceAll('price-reports', 'price-alerts'),
  );
  return ['your-app', 'price-alerts'].map((app) => join(tree, 'examples', app));
}

describe('the component once per app', () => {
  it('two apps in one namespace: no kind/namespace/name twice, each selects its own pods', () => {
    const apps = ['your-app', 'curve-builder'].map((app) => render(join(deploy, 'examples', app)));
    // As two `kubectl apply -k` put them into one namespace, and as the two-apps kustomization renders them.
    expect(duplicateIds(apps.flat())).toEqual([]);
    expect(render(join(deploy, 'examples', 'two-apps'))).toEqual(apps.flat());
    for (const [index, app] of ['price-reports', 'curve-builder'].entries()) {
      const docs = apps[index]!;
      for (const doc of docs.filter((d) => d.kind === 'Service' || d.kind === 'NetworkPolicy')) {
        expect(doc.metadata.name).toMatch(new RegExp(`^${app}-oauth-sidecar-`));
        expect(selectorOf(doc)).toEqual({
          'oauth-sidecar/injected': 'true',
          'oauth-sidecar/app': app,
        });
      }
      expect(template(docs, app).metadata.labels['oauth-sidecar/app']).toBe(app);
      const envFrom = (
        template(docs, app).spec.initContainers[0] as unknown as {
          envFrom: { configMapRef: { name: string } }[];
        }
      ).envFrom;
      expect(envFrom).toEqual([{ configMapRef: { name: `${app}-oauth-sidecar` } }]);
      expect(crossReferences(docs, secretExample)).toEqual([]);
    }
  });

  it('the check catches the collision of the component with fixed names (without its replacement)', () => {
    const fixed = twoAppsTree((kustomization) => delete kustomization.replacements);
    expect(duplicateIds(fixed.flatMap(render)).sort()).toEqual([
      'ConfigMap/-/oauth-sidecar',
      'NetworkPolicy/-/oauth-sidecar-egress',
      'Service/-/oauth-sidecar-metrics',
    ]);
    const derived = twoAppsTree(() => {});
    expect(duplicateIds(derived.flatMap(render))).toEqual([]);
  });

  it('more than one Deployment beside the component stops the render (kustomize does too)', () => {
    const [app] = twoAppsTree(() => {});
    const kustomization = join(app!, 'kustomization.yaml');
    const text = readFileSync(kustomization, 'utf8');
    writeFileSync(
      kustomization,
      text.replace('  - deployment.yaml', '  - deployment.yaml\n  - other.yaml'),
    );
    const other = readFileSync(join(app!, 'deployment.yaml'), 'utf8').replaceAll(
      'price-reports',
      'price-worker',
    );
    writeFileSync(join(app!, 'other.yaml'), other);
    expect(() => render(app!)).toThrow(/multiple matches/);
  });

  it('needs no label: the one Deployment beside the component gets the sidecar, and none stops the render', () => {
    const [app] = twoAppsTree(() => {});
    const deployment = readFileSync(join(app!, 'deployment.yaml'), 'utf8');
    // No oauth-sidecar label anywhere on the workload (the component once selected a label and,
    // without it, rendered its ConfigMap, Service and NetworkPolicy around no sidecar).
    expect(deployment).not.toContain('oauth-sidecar');
    const docs = render(app!);
    const pod = template(docs, 'price-reports');
    expect(pod.spec.initContainers.map((c) => c.name)).toEqual([
      'oauth-sidecar',
      'fetch-templates',
    ]);
    expect(pod.metadata.labels).toMatchObject({
      'oauth-sidecar/injected': 'true',
      'oauth-sidecar/app': 'price-reports',
    });
    expect(crossReferences(docs, secretExample)).toEqual([]);

    // A kustomization with the component and no Deployment: kustomize says `nothing selected by
    // Deployment…` (the replacement's source), and so does the built-in renderer.
    const kustomization = join(app!, 'kustomization.yaml');
    writeFileSync(
      kustomization,
      readFileSync(kustomization, 'utf8').replace('resources:\n  - deployment.yaml\n', ''),
    );
    expect(() => render(app!)).toThrow(/nothing selected/);
  });

  it('deploy/README.md names the longest Deployment name whose metrics Service stays within 63 characters', () => {
    const docs = render(join(deploy, 'examples', 'your-app'));
    const names = docs.filter((d) => d.kind !== 'Deployment').map((d) => d.metadata.name);
    const suffix = Math.max(...names.map((name) => name.length - 'price-reports'.length));
    const service = docs.find((d) => d.kind === 'Service')!.metadata.name;
    expect(service.length - 'price-reports'.length).toBe(suffix);
    const readme = readFileSync(join(deploy, 'README.md'), 'utf8').replace(/\s+/g, ' ');
    const stated = /Deployment names up to (\d+) characters fit/.exec(readme);
    // A Service's name is an RFC 1035 label: 63 characters at most.
    expect(Number(stated?.[1])).toBe(63 - suffix);
  });

  it('ports and port names moved for an app on 8080/9090 with a port named admin', () => {
    const docs = render(join(deploy, 'examples', 'curve-builder'));
    const pod = template(docs, 'curve-builder');
    const sidecar = pod.spec.initContainers[0]!;
    expect(sidecar.ports).toEqual([
      { name: 'sidecar-proxy', containerPort: 18080, protocol: 'TCP' },
      { name: 'sidecar-admin', containerPort: 19090, protocol: 'TCP' },
    ]);
    expect(sidecar.startupProbe.httpGet).toEqual({ path: '/readyz', port: 'sidecar-admin' });
    const configMap = docs.find((d) => d.kind === 'ConfigMap')!;
    expect(configMap.data).toMatchObject({
      PROXY_LISTEN: '127.0.0.1:18080',
      ADMIN_LISTEN: '0.0.0.0:19090',
      UPSTREAM_BASE_URL: 'https://api.sparkcommodities.com',
    });
    const service = docs.find((d) => d.kind === 'Service')!;
    expect((service.spec as { ports: unknown[] }).ports).toEqual([
      { name: 'admin', port: 9090, targetPort: 'sidecar-admin', protocol: 'TCP' },
    ]);
    expect(crossReferences(docs, secretExample)).toEqual([]);

    // The same app with the sidecar's default ports: the checks name each clash.
    const clashing = structuredClone(docs);
    const defaults = template(clashing, 'curve-builder').spec.initContainers[0]!;
    defaults.ports = [
      { name: 'proxy', containerPort: 8080 },
      { name: 'admin', containerPort: 9090 },
    ];
    const problems = crossReferences(clashing, secretExample).join('\n');
    for (const clash of ['port 8080', 'port 9090', 'port admin']) {
      expect(problems).toContain(`containers oauth-sidecar and api both declare ${clash}`);
    }
    expect(problems).toContain('PROXY_LISTEN port 18080 is not a port of the container');
    expect(problems).toContain("startupProbe port sidecar-admin is not ADMIN_LISTEN's port 19090");
  });
});
