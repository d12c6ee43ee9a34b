/**
 * A small renderer for the kustomizations in deploy/: just the features they use (resources,
 * configMapGenerator without hash suffixes, components, strategic merge patches on their own
 * object or on targets by kind/name/label, replacements (./replacements.ts), local-config objects
 * left out of the output). It lets `npm test` validate the manifests on machines
 * without kubectl; deploy/ci/validate-manifests.sh compares its output with `kubectl kustomize`.
 * Anything else in a kustomization is refused, so the two cannot silently drift apart.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import {
  applyReplacements,
  selects,
  type Replacement,
  type ResourceSelector,
} from './replacements.js';
import type { Manifest } from './manifest.js';

export type { Manifest };

const SUPPORTED_KEYS = new Set([
  'apiVersion',
  'kind',
  'resources',
  'configMapGenerator',
  'generatorOptions',
  'components',
  'patches',
  'replacements',
]);

/**
 * A strategic merge patch from a file, applied to the objects `target` selects (kind, name,
 * labelSelector), or without a target to the object of the patch's own kind and name.
 */
interface Patch {
  path: string;
  target?: ResourceSelector;
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
  /** Inline, or `path:` a file holding one replacement (or a list of them). */
  replacements?: (Replacement | { path: string })[];
}

/**
 * Secrets the manifests reference but that are created by hand (never committed with values):
 * their example files give the checks the shape (names and keys).
 */
export const SECRET_EXAMPLES = [
  'deploy/base/secret.example.yaml',
  'deploy/overlays/shared-gateway/token-store-secret.example.yaml',
  'deploy/overlays/shared-gateway-redis/redis-secret.example.yaml',
  'deploy/overlays/shared-gateway-sentinel/sentinel-secret.example.yaml',
] as const;

/** The kustomizations under deploy/ that are validated (deploy/ci/validate-manifests.sh renders the same). */
export const KUSTOMIZATIONS = [
  'base',
  'monitoring',
  'overlays/shared-gateway',
  'overlays/shared-gateway-redis',
  'overlays/shared-gateway-sentinel',
  'examples/your-app',
  'examples/curve-builder',
  'examples/two-apps',
  'examples/gateway-client',
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

/**
 * Renders the kustomization in `dir` (recursively through directory resources), as `kubectl
 * kustomize` would print it: objects annotated `config.kubernetes.io/local-config` are left out.
 */
export function renderKustomization(dir: string): Manifest[] {
  return accumulate(dir).filter(
    (doc) => (doc.metadata.annotations as LocalConfig)?.[LOCAL_CONFIG] !== 'true',
  );
}

const LOCAL_CONFIG = 'config.kubernetes.io/local-config';
type LocalConfig = Record<string, string> | undefined;

function readKustomization(dir: string): { file: string; kustomization: Kustomization } {
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
  return { file, kustomization };
}

/**
 * The objects of the kustomization in `dir`, local-config ones included. A Component's own
 * patches and replacements are left to {@link accumulate} of the kustomization that lists it:
 * they act on that kustomization's objects.
 */
function accumulate(dir: string): Manifest[] {
  const { file, kustomization } = readKustomization(dir);
  const out: Manifest[] = [];
  for (const resource of kustomization.resources ?? []) {
    const path = resolve(dir, resource);
    out.push(...(statSync(path).isDirectory() ? accumulate(path) : readManifests(path)));
  }
  for (const component of kustomization.components ?? []) {
    const path = resolve(dir, component);
    const included = readKustomization(path).kustomization;
    if (included.kind !== 'Component') throw new Error(`${path}: not a kustomize Component`);
    out.push(...accumulate(path));
    transform(path, included, out);
  }
  for (const generator of kustomization.configMapGenerator ?? []) {
    // kustomize's name hash is not reproduced here; the dashboard needs no rollout on change.
    if (kustomization.generatorOptions?.disableNameSuffixHash !== true) {
      throw new Error(`${file}: configMapGenerator needs generatorOptions.disableNameSuffixHash`);
    }
    out.push(generateConfigMap(dir, generator));
  }
  if (kustomization.kind !== 'Component') transform(dir, kustomization, out);

  const duplicates = duplicateIds(out);
  if (duplicates.length > 0) throw new Error(`${file}: ${duplicates.join(', ')} defined twice`);
  return out;
}

/** Patches, then replacements: kustomize runs its ReplacementTransformer after the patches. */
function transform(dir: string, kustomization: Kustomization, docs: Manifest[]): void {
  applyPatches(dir, kustomization.patches ?? [], docs);
  const replacements = (kustomization.replacements ?? []).flatMap((entry) =>
    'path' in entry
      ? ([parse(readFileSync(resolve(dir, entry.path), 'utf8'))].flat() as Replacement[])
      : [entry],
  );
  applyReplacements(replacements, docs);
}

/** `kind/namespace/name` of every object that is there more than once (namespace `-` if none). */
export function duplicateIds(docs: Manifest[]): string[] {
  const id = (doc: Manifest) =>
    `${doc.kind}/${(doc.metadata.namespace as string | undefined) ?? '-'}/${doc.metadata.name}`;
  const ids = docs.map(id);
  return [...new Set(ids.filter((item, index) => ids.indexOf(item) !== index))];
}

function applyPatches(dir: string, patches: Patch[], docs: Manifest[]): void {
  for (const { path, target } of patches) {
    const [patch] = readManifests(resolve(dir, path));
    const selector = target ?? { kind: patch!.kind, name: patch!.metadata.name };
    let applied = 0;
    for (const [index, doc] of docs.entries()) {
      if (!selects(selector, doc)) continue;
      const { metadata, ...rest } = patch!;
      // With a target, the patch's own name is a placeholder: each target keeps its name.
      const { name: _name, ...otherMetadata } = metadata;
      docs[index] = merge(doc, { ...rest, metadata: otherMetadata }, []) as Manifest;
      applied += 1;
    }
    if (applied === 0 && target === undefined) {
      throw new Error(`${resolve(dir, path)}: no ${patch!.kind}/${patch!.metadata.name} to patch`);
    }
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The merge keys of a list at `path` (field names from the document root), as the Kubernetes
 * schema declares them for the lists deploy/ patches; other lists are replaced whole.
 */
function mergeKeys(path: string[]): string[] | undefined {
  const [parent, field] = path.slice(-2);
  if (['containers', 'initContainers', 'volumes', 'env'].includes(field!)) return ['name'];
  if (field === 'volumeMounts') return ['mountPath'];
  if (field === 'ports' && (parent === 'containers' || parent === 'initContainers')) {
    return ['containerPort', 'protocol'];
  }
  if (field === 'ports' && path.length === 2 && parent === 'spec') return ['port', 'protocol']; // a Service's
  return undefined;
}

/**
 * Strategic merge as kustomize does it for what deploy/ patches: maps merge key by key; lists with
 * merge keys ({@link mergeKeys}) merge item by item, the patch's items first, unless the patch's
 * list holds `{$patch: replace}`; other lists replace.
 */
function merge(base: unknown, patch: unknown, path: string[]): unknown {
  if (isObject(base) && isObject(patch)) {
    const out: Record<string, unknown> = { ...base };
    for (const [key, value] of Object.entries(patch)) {
      out[key] = merge(base[key], value, [...path, key]);
    }
    return out;
  }
  if (Array.isArray(patch)) {
    const items = patch.filter((item) => !(isObject(item) && item.$patch === 'replace'));
    const keys = mergeKeys(path);
    if (items.length < patch.length || keys === undefined || !Array.isArray(base)) return items;
    const same = (a: unknown, b: unknown) =>
      isObject(a) && isObject(b) && keys.every((key) => a[key] === b[key]);
    const fromPatch = items.map((item) =>
      merge(
        base.find((b) => same(b, item)),
        item,
        path,
      ),
    );
    return [...fromPatch, ...base.filter((b) => !items.some((item) => same(b, item)))];
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
