/**
 * A small renderer for the kustomizations in deploy/: just the features they use (resources,
 * configMapGenerator without hash suffixes, components, strategic merge patches on labelled
 * targets). It lets `npm test` validate the manifests on machines
 * without kubectl; deploy/ci/validate-manifests.sh compares its output with `kubectl kustomize`.
 * Anything else in a kustomization is refused, so the two cannot silently drift apart.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

const SUPPORTED_KEYS = new Set([
  'apiVersion',
  'kind',
  'resources',
  'configMapGenerator',
  'generatorOptions',
  'components',
  'patches',
]);

/** A strategic merge patch from a file, applied to the objects of `kind` carrying a label. */
interface Patch {
  path: string;
  target: { kind: string; labelSelector: string };
}

interface ConfigMapGenerator {
  name: string;
  files?: string[];
  literals?: string[];
  options?: { labels?: Record<string, string>; annotations?: Record<string, string> };
}

interface Kustomization {
  kind?: string;
  resources?: string[];
  components?: string[];
  patches?: Patch[];
  configMapGenerator?: ConfigMapGenerator[];
  generatorOptions?: { disableNameSuffixHash?: boolean };
}

/**
 * Secrets the manifests reference but that are created by hand (never committed with values):
 * their example files give the checks the shape (names and keys).
 */
export const SECRET_EXAMPLES = [
  'deploy/base/secret.example.yaml',
  'deploy/overlays/shared-gateway/token-store-secret.example.yaml',
  'deploy/overlays/shared-gateway-redis/redis-secret.example.yaml',
] as const;

/** The kustomizations under deploy/ that are validated (deploy/ci/validate-manifests.sh renders the same). */
export const KUSTOMIZATIONS = [
  'base',
  'monitoring',
  'overlays/shared-gateway',
  'overlays/shared-gateway-redis',
  'examples/your-app',
] as const;

/** Each of {@link KUSTOMIZATIONS} rendered, by name; `root` is the repository. */
export function renderAll(root: string): Map<string, Manifest[]> {
  return new Map(
    KUSTOMIZATIONS.map((name) => [name, renderKustomization(join(root, 'deploy', name))]),
  );
}

/** Every document of a YAML file that holds Kubernetes objects. */
export function readManifests(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
      return doc.toJS() as Manifest | null;
    })
    .filter((doc): doc is Manifest => doc !== null);
}

/** Renders the kustomization in `dir` (recursively through directory resources). */
export function renderKustomization(dir: string): Manifest[] {
  const file = ['kustomization.yaml', 'kustomization.yml']
    .map((name) => join(dir, name))
    .find((path) => existsSync(path));
  if (file === undefined) throw new Error(`${dir}: no kustomization.yaml`);
  const kustomization = parse(readFileSync(file, 'utf8')) as Kustomization;
  for (const key of Object.keys(kustomization)) {
    if (!SUPPORTED_KEYS.has(key)) {
      throw new Error(`${file}: "${key}" is not supported by deploy/validate/kustomize.ts`);
    }
  }

  const out: Manifest[] = [];
  for (const resource of kustomization.resources ?? []) {
    const path = resolve(dir, resource);
    out.push(...(statSync(path).isDirectory() ? renderKustomization(path) : readManifests(path)));
  }
  for (const generator of kustomization.configMapGenerator ?? []) {
    // kustomize's name hash is not reproduced here; the dashboard needs no rollout on change.
    if (kustomization.generatorOptions?.disableNameSuffixHash !== true) {
      throw new Error(`${file}: configMapGenerator needs generatorOptions.disableNameSuffixHash`);
    }
    out.push(generateConfigMap(dir, generator));
  }
  // A Component's resources and patches act on the including kustomization's objects.
  for (const component of kustomization.components ?? []) {
    const path = resolve(dir, component);
    const included = parse(readFileSync(join(path, 'kustomization.yaml'), 'utf8')) as Kustomization;
    if (included.kind !== 'Component') throw new Error(`${path}: not a kustomize Component`);
    out.push(...renderKustomization(path));
    applyPatches(path, included.patches ?? [], out);
  }
  if (kustomization.kind !== 'Component') applyPatches(dir, kustomization.patches ?? [], out);

  const seen = new Set<string>();
  for (const doc of out) {
    const id = `${doc.kind}/${doc.metadata.name}`;
    if (seen.has(id)) throw new Error(`${file}: ${id} is defined twice`);
    seen.add(id);
  }
  return out;
}

function applyPatches(dir: string, patches: Patch[], docs: Manifest[]): void {
  for (const { path, target } of patches) {
    const [patch] = readManifests(resolve(dir, path));
    const [label, value] = target.labelSelector.split('=') as [string, string];
    for (const [index, doc] of docs.entries()) {
      if (doc.kind !== target.kind || doc.metadata.labels?.[label] !== value) continue;
      const { metadata, ...rest } = patch!;
      const { name: _name, ...otherMetadata } = metadata;
      docs[index] = merge(doc, { ...rest, metadata: otherMetadata }) as Manifest;
    }
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const named = (value: unknown): value is { name: string }[] =>
  Array.isArray(value) && value.every((item) => isObject(item) && typeof item.name === 'string');

/**
 * Strategic merge as kustomize does it for what deploy/ patches: maps merge key by key; lists of
 * named objects (containers, volumes) merge by name, the patch's items first; other lists replace.
 */
function merge(base: unknown, patch: unknown): unknown {
  if (isObject(base) && isObject(patch)) {
    const out: Record<string, unknown> = { ...base };
    for (const [key, value] of Object.entries(patch)) out[key] = merge(base[key], value);
    return out;
  }
  if (named(base) && named(patch)) {
    const fromPatch = patch.map((item) =>
      merge(
        base.find((b) => b.name === item.name),
        item,
      ),
    );
    return [...fromPatch, ...base.filter((b) => !patch.some((item) => item.name === b.name))];
  }
  return patch === undefined ? base : patch;
}

function generateConfigMap(dir: string, generator: ConfigMapGenerator): Manifest {
  const data: Record<string, string> = {};
  for (const entry of generator.files ?? []) {
    const [key, path] = entry.includes('=') ? entry.split('=', 2) : [basename(entry), entry];
    data[key!] = readFileSync(resolve(dir, path!), 'utf8');
  }
  for (const literal of generator.literals ?? []) {
    const at = literal.indexOf('=');
    data[literal.slice(0, at)] = literal.slice(at + 1);
  }
  const metadata: Manifest['metadata'] = { name: generator.name };
  if (generator.options?.labels) metadata.labels = generator.options.labels;
  if (generator.options?.annotations) metadata.annotations = generator.options.annotations;
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata, data };
}
