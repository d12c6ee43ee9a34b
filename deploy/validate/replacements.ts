/**
 * kustomize `replacements` for the built-in renderer (deploy/validate/kustomize.ts): the subset
 * kustomize documents (kubectl.docs.kubernetes.io "replacements"): a source by
 * group/version/kind/name/namespace and `fieldPath` (exactly one object must match), targets by
 * `select` (the same fields plus `labelSelector`) minus `reject`, `fieldPaths` with map keys,
 * `[key=value]` list items, numeric indexes and `*`, and the options `delimiter`, `index` and
 * `create`. A target that selects no object, or a target path that matches nothing without
 * `create`, is an error here (kustomize skips both silently), so that a typo, or a target selected
 * by a name an earlier target of the same replacement changed, cannot pass unnoticed.
 */
import type { Manifest } from './manifest.js';

export interface ResourceSelector {
  group?: string;
  version?: string;
  kind?: string;
  name?: string;
  namespace?: string;
  labelSelector?: string;
}

export interface FieldOptions {
  delimiter?: string;
  index?: number;
  create?: boolean;
}

export interface Replacement {
  source: Omit<ResourceSelector, 'labelSelector'> & { fieldPath?: string; options?: FieldOptions };
  targets: {
    select: ResourceSelector;
    reject?: ResourceSelector[];
    fieldPaths?: string[];
    options?: FieldOptions;
  }[];
}

const DEFAULT_FIELD_PATH = 'metadata.name';

/** Applies each replacement in order to `docs` (in place), as kustomize's ReplacementTransformer. */
export function applyReplacements(replacements: Replacement[], docs: Manifest[]): void {
  for (const replacement of replacements) {
    if (replacement.source === undefined || !Array.isArray(replacement.targets)) {
      throw new Error('replacements must specify a source and at least one target');
    }
    const value = sourceValue(replacement.source, docs);
    for (const target of replacement.targets) {
      if (target.select === undefined) throw new Error('target must specify resources to select');
      const selected = docs.filter(
        (doc) =>
          selects(target.select, doc) &&
          !(target.reject ?? []).some((reject) => selects(reject, doc)),
      );
      if (selected.length === 0) {
        throw new Error(`replacement target ${JSON.stringify(target.select)} selects nothing`);
      }
      for (const doc of selected) {
        for (const fieldPath of target.fieldPaths ?? [DEFAULT_FIELD_PATH]) {
          setField(doc, fieldPath, value, target.options);
        }
      }
    }
  }
}

/** Whether `selector` picks `doc` (every field given must match; labelSelector as `k=v[,k=v]`). */
export function selects(selector: ResourceSelector, doc: Manifest): boolean {
  const [group, version] = doc.apiVersion.includes('/')
    ? doc.apiVersion.split('/', 2)
    : ['', doc.apiVersion];
  const namespace = (doc.metadata.namespace as string | undefined) ?? '';
  const checks: [string | undefined, string | undefined][] = [
    [selector.group, group],
    [selector.version, version],
    [selector.kind, doc.kind],
    [selector.name, doc.metadata.name],
    [selector.namespace, namespace],
  ];
  if (checks.some(([wanted, actual]) => wanted !== undefined && wanted !== actual)) return false;
  if (selector.labelSelector === undefined) return true;
  return selector.labelSelector.split(',').every((term) => {
    const [key, wanted] = term.split('=', 2).map((part) => part.trim());
    return doc.metadata.labels?.[key!] === wanted;
  });
}

function sourceValue(source: Replacement['source'], docs: Manifest[]): unknown {
  const matches = docs.filter((doc) => selects(source, doc));
  const id = JSON.stringify({ ...source, fieldPath: undefined, options: undefined });
  if (matches.length !== 1) {
    throw new Error(`${matches.length === 0 ? 'nothing selected' : 'multiple matches'} for ${id}`);
  }
  const fieldPath = source.fieldPath ?? DEFAULT_FIELD_PATH;
  const found = lookup(matches[0], splitPath(fieldPath));
  if (found.length !== 1 || found[0]!.value === undefined || found[0]!.value === '') {
    throw new Error(`fieldPath \`${fieldPath}\` is missing for replacement source ${id}`);
  }
  const value = found[0]!.value;
  const { delimiter, index = 0 } = source.options ?? {};
  if (delimiter === undefined || delimiter === '') return value;
  const text = scalarText(value);
  const parts = text.split(delimiter);
  if (index < 0 || index >= parts.length) {
    throw new Error(`options.index ${index} is out of bounds for value ${text}`);
  }
  return parts[index];
}

/** A scalar's text; a delimiter applies to scalars only (as in kustomize). */
function scalarText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw new Error('delimiter option can only be used with scalar nodes');
}

/** `a.b.[name=x].c` → ['a', 'b', '[name=x]', 'c']; `[a.b]` and `a\.b` keep their dots. */
export function splitPath(path: string): string[] {
  const out: string[] = [];
  let current = '';
  let depth = 0;
  for (let i = 0; i < path.length; i += 1) {
    const char = path[i]!;
    if (char === '\\' && path[i + 1] === '.') {
      current += '.';
      i += 1;
    } else if (char === '.' && depth === 0) {
      out.push(current);
      current = '';
    } else {
      if (char === '[') depth += 1;
      if (char === ']') depth -= 1;
      current += char;
    }
  }
  out.push(current);
  return out;
}

/** A place a path reached: the container and the key in it (the value is `container[key]`). */
interface Slot {
  container: Record<string, unknown> | unknown[];
  key: string | number;
  value: unknown;
}

const isMap = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Every slot `segments` reaches from `node`; `create` adds missing map keys on the way. */
function lookup(node: unknown, segments: string[], create = false): Slot[] {
  let slots: Slot[] = [{ container: [node], key: 0, value: node }];
  for (const [position, segment] of segments.entries()) {
    const last = position === segments.length - 1;
    slots = slots.flatMap((slot) => step(slot.value, segment, create, last));
  }
  return slots;
}

function step(node: unknown, segment: string, create: boolean, last: boolean): Slot[] {
  const selector = /^\[([^=\]]+)=([^\]]*)\]$/.exec(segment);
  if (Array.isArray(node)) {
    if (segment === '*') return node.map((value, key) => ({ container: node, key, value }));
    if (/^\d+$/.test(segment)) {
      const key = Number(segment);
      return key < node.length ? [{ container: node, key, value: node[key] }] : [];
    }
    if (selector === null) return [];
    const [, field, wanted] = selector;
    return node.flatMap((value, key) =>
      isMap(value) && String(value[field!]) === wanted ? [{ container: node, key, value }] : [],
    );
  }
  if (!isMap(node) || selector !== null) return [];
  if (segment === '*') {
    return Object.entries(node).map(([key, value]) => ({ container: node, key, value }));
  }
  const key = segment.startsWith('[') && segment.endsWith(']') ? segment.slice(1, -1) : segment;
  if (!(key in node)) {
    if (!create) return [];
    node[key] = last ? undefined : {};
  }
  return [{ container: node, key, value: node[key] }];
}

function setField(doc: Manifest, fieldPath: string, value: unknown, options?: FieldOptions): void {
  const segments = splitPath(fieldPath);
  if (options?.create === true && segments.includes('*')) {
    throw new Error('cannot support create option in a multi-value target');
  }
  const slots = lookup(doc, segments, options?.create === true);
  if (slots.length === 0) {
    throw new Error(`${doc.kind}/${doc.metadata.name}: no field ${fieldPath} to replace`);
  }
  for (const { container, key, value: old } of slots) {
    (container as Record<string | number, unknown>)[key] = newValue(old, value, options);
  }
}

/** The target's new value: with a delimiter, `value` at `index` of the old one split (or around it). */
function newValue(old: unknown, value: unknown, options?: FieldOptions): unknown {
  let next = value;
  if (options?.delimiter !== undefined && options.delimiter !== '') {
    const parts = old === undefined ? [] : scalarText(old).split(options.delimiter);
    const index = options.index ?? 0;
    const text = scalarText(value);
    if (index < 0) parts.unshift(text);
    else if (index >= parts.length) parts.push(text);
    else parts[index] = text;
    next = parts.join(options.delimiter);
  }
  // A scalar keeps the target's type, as kustomize copies only the value ("9090" into a port).
  if (typeof old === 'number' && typeof next === 'string' && next.trim() !== '') {
    const number = Number(next);
    if (Number.isFinite(number)) return number;
  }
  if (typeof old === 'string' && (typeof next === 'number' || typeof next === 'boolean')) {
    return String(next);
  }
  return structuredClone(next);
}
