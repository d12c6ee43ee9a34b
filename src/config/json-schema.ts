/**
 * The JSON Schema of the `--config` YAML file (config/oauth-sidecar.schema.json), made from the
 * one schema, FIELDS: its keys and sections, each value's shape as its parser describes it, the
 * environment variable, the default and the older names. scripts/config-schema.mjs writes it;
 * test/config-schema.test.ts fails when the committed file differs from what this makes.
 */
import { FIELDS, type FieldKey, type FieldSpec } from './schema.js';

type JsonObject = Record<string, unknown>;

/** The shipped file's name, for `# yaml-language-server: $schema=` lines. */
export const SCHEMA_FILE = 'config/oauth-sidecar.schema.json';

/** A default as the YAML file would write it (a listener as `host:port`). */
function yamlDefault(value: unknown): unknown {
  if (typeof value === 'object' && value !== null && 'host' in value && 'port' in value) {
    const { host, port } = value as { host: string; port: number };
    return `${host.includes(':') ? `[${host}]` : host}:${port}`;
  }
  return value;
}

function property(key: FieldKey, spec: FieldSpec<unknown>, older = false): JsonObject {
  const { description, ...shape } = spec.parse.shape ?? {};
  const what = typeof description === 'string' ? `: ${description}` : '';
  const out: JsonObject = {
    ...shape,
    description: older
      ? `Older name of ${key}; set one of the two (environment: ${spec.alias?.env ?? ''}).`
      : `${spec.env}${what}${spec.secret ? ' (a secret: never shown in any message)' : ''}.`,
  };
  if (spec.default !== undefined && !older) out.default = yamlDefault(spec.default);
  if (older) out.deprecated = true;
  return out;
}

/** Place `value` at the dotted path `dotted` under `root`, making the sections on the way. */
function place(root: JsonObject, dotted: string, value: JsonObject): void {
  const parts = dotted.split('.');
  let node = root;
  for (const part of parts.slice(0, -1)) {
    const properties = node.properties as Record<string, JsonObject>;
    properties[part] ??= {
      type: ['object', 'null'],
      additionalProperties: false,
      properties: {},
    };
    node = properties[part];
  }
  (node.properties as Record<string, JsonObject>)[parts.at(-1) as string] = value;
}

/** The whole schema (draft 2020-12), keys in FIELDS' order. */
export function configJsonSchema(): JsonObject {
  const root: JsonObject = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'oauth-sidecar configuration file (--config)',
    description:
      'Generated from src/config/schema.ts by scripts/config-schema.mjs; do not edit. Keys and ' +
      'values: docs/configuration.md. Environment variables override the file.',
    type: ['object', 'null'],
    additionalProperties: false,
    properties: {},
  };
  for (const [key, spec] of Object.entries(FIELDS) as [FieldKey, FieldSpec<unknown>][]) {
    place(root, key, property(key, spec));
    if (spec.alias !== undefined) place(root, spec.alias.key, property(key, spec, true));
  }
  return root;
}

/** The file's text: two-space JSON and a final newline (prettier's form). */
export function configJsonSchemaText(): string {
  return `${JSON.stringify(configJsonSchema(), null, 2)}\n`;
}
