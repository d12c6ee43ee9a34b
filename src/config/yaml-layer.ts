/**
 * The YAML layer of the configuration: the file read and flattened into `section.key` → raw value.
 * Problems name the file; an unknown key gets the nearest known one as a suggestion.
 */
import { readFailure, type ReadTextFile } from './credentials.js';
import { nearest } from './nearest.js';
import { FIELDS, type FieldKey } from './schema.js';

const FIELD_KEYS = Object.keys(FIELDS) as FieldKey[];
export function aliasOf(key: FieldKey): { key: string; env: string } | undefined {
  return (FIELDS[key] as { alias?: { key: string; env: string } }).alias;
}

/** Older names still accepted (`token.store.url` for `store.url`). */
const ALIAS_KEYS = new Set(
  FIELD_KEYS.flatMap((key) => {
    const alias = aliasOf(key);
    return alias === undefined ? [] : [alias.key];
  }),
);
const ALL_KEYS = [...FIELD_KEYS, ...ALIAS_KEYS];
/** Keys at the top of the file (`strictConfig`), beside the sections. */
const TOP_LEVEL = new Set(ALL_KEYS.filter((key) => !key.includes('.')));
export const SECTIONS = [
  ...new Set(ALL_KEYS.filter((key) => key.includes('.')).map((key) => key.split('.')[0] as string)),
];
/** Mappings below a section (`token.store`): every dotted prefix of a key that is not a key. */
const SUBSECTIONS = new Set(
  ALL_KEYS.flatMap((key) => {
    const parts = key.split('.');
    return parts.slice(2).map((_, i) => parts.slice(0, i + 2).join('.'));
  }),
);

// Own keys only: `in` would find `toString` or `__proto__` on Object.prototype.
const isField = (dotted: string): dotted is FieldKey => Object.hasOwn(FIELDS, dotted);
const isKnown = (dotted: string): boolean => isField(dotted) || ALIAS_KEYS.has(dotted);

/** Read and flatten the YAML file into `section.key` → raw value; problems name the file. */
export async function readYamlLayer(
  file: string,
  readFile: ReadTextFile,
  problems: string[],
): Promise<Map<string, unknown>> {
  const values = new Map<string, unknown>();
  let text: string;
  try {
    text = await readFile(file);
  } catch (error) {
    problems.push(`--config ${file}: cannot read configuration file (${readFailure(error)})`);
    return values;
  }
  const { parseYaml } = await import('./yaml.js');
  const parsed = parseYaml(text);
  if (!parsed.ok) {
    problems.push(`--config ${file}: ${parsed.problem}`);
    return values;
  }
  const root = parsed.value;
  if (root === null || root === undefined) return values;
  if (!isMapping(root)) {
    problems.push(`--config ${file}: must be a YAML mapping with sections ${SECTIONS.join(', ')}`);
    return values;
  }
  for (const [section, body] of Object.entries(root)) {
    if (TOP_LEVEL.has(section)) {
      values.set(section, body);
      continue;
    }
    if (!SECTIONS.includes(section)) {
      problems.push(unknownKey(section, file));
      continue;
    }
    if (body === null || body === undefined) continue;
    if (!isMapping(body)) {
      problems.push(
        `${section} (in ${file}): must be a mapping of keys, e.g. ${section}.<key>: value`,
      );
      continue;
    }
    flatten(section, body, file, values, problems);
  }
  return values;
}

/** Collect `prefix.key` values of one mapping, descending into subsections (`token.store`). */
function flatten(
  prefix: string,
  body: Record<string, unknown>,
  file: string,
  values: Map<string, unknown>,
  problems: string[],
): void {
  for (const [key, value] of Object.entries(body)) {
    const dotted = `${prefix}.${key}`;
    if (isKnown(dotted)) values.set(dotted, value);
    else if (SUBSECTIONS.has(dotted) && isMapping(value)) {
      flatten(dotted, value, file, values, problems);
    } else if (SUBSECTIONS.has(dotted) && (value === null || value === undefined)) continue;
    else problems.push(unknownKey(dotted, file));
  }
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `upstream.baseURL: unknown key (in FILE), did you mean upstream.baseUrl?` */
function unknownKey(dotted: string, file: string): string {
  const suggestion = suggest(dotted);
  const hint = suggestion === undefined ? '' : `, did you mean ${suggestion}?`;
  return `${dotted}: unknown key (in ${file})${hint}`;
}

function suggest(dotted: string): string | undefined {
  // An environment variable name or a flat dotted key used as a top-level YAML key.
  const byEnv = FIELD_KEYS.find(
    (key) => FIELDS[key].env === dotted || aliasOf(key)?.env === dotted,
  );
  if (byEnv !== undefined) return byEnv;
  if (isField(dotted)) {
    const [section, key] = dotted.split('.');
    return `${dotted} written nested (${section ?? ''}: { ${key ?? ''}: ... })`;
  }
  return nearest(dotted, dotted.includes('.') ? ALL_KEYS : [...SECTIONS, ...TOP_LEVEL], 2);
}
