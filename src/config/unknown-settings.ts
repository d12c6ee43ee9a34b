/**
 * Unknown settings (docs/configuration.md "Unknown settings"): an environment variable with one of
 * the sidecar's prefixes that is no setting is named, with the nearest setting as a suggestion.
 * The known names are derived from the schema, so a key added to `FIELDS` is known at once.
 */
import { isIP } from 'node:net';
import { nearest } from './nearest.js';
import { FIELDS } from './schema.js';

/** The prefixes of the sidecar's own variables; `OTEL_` belongs to OpenTelemetry and is not checked. */
export const SETTING_PREFIXES = [
  'UPSTREAM_',
  'TOKEN_',
  'CLIENT_',
  'PROXY_',
  'ADMIN_',
  'LOG_',
  'STORE_',
  'CACHE_',
  'QUOTA_',
  'TRACING_',
  'CALLER_',
] as const;

/** Every variable the schema reads: each key's own name and its alias. */
export const KNOWN_VARIABLES: ReadonlySet<string> = new Set(
  Object.values(FIELDS).flatMap((spec) => {
    const alias = (spec as { alias?: { env: string } }).alias;
    return alias === undefined ? [spec.env] : [spec.env, alias.env];
  }),
);

export interface UnknownSetting {
  name: string;
  suggestion: string | undefined;
}

/**
 * The variables of `env` that carry a setting prefix but are no setting, in name order. Kubernetes
 * service links (`PROXY_PORT=tcp://10.0.0.7:8080` for a Service named `proxy`) are skipped: the
 * kubelet injects them into every pod of the namespace.
 */
export function unknownSettings(env: Record<string, string | undefined>): UnknownSetting[] {
  return Object.keys(env)
    .filter((name) => SETTING_PREFIXES.some((prefix) => name.startsWith(prefix)))
    .filter((name) => !KNOWN_VARIABLES.has(name) && (env[name] ?? '').trim() !== '')
    .filter((name) => !isServiceLink(name, env[name] ?? ''))
    .sort()
    .map((name) => ({ name, suggestion: suggestVariable(name) }));
}

/** `CACHE_RULE: not a setting, did you mean CACHE_RULES?` (the value is never shown: it may be a secret). */
export function describeUnknown({ name, suggestion }: UnknownSetting): string {
  const hint = suggestion === undefined ? '' : `, did you mean ${suggestion}?`;
  return `${name}: not a setting${hint} (docs/configuration.md)`;
}

/**
 * A setting the name starts (`UPSTREAM_TIMEOUT` → `UPSTREAM_TIMEOUT_MS`), else the nearest one
 * within a few edits, more for longer names.
 */
function suggestVariable(name: string): string | undefined {
  const extended = [...KNOWN_VARIABLES].filter((known) => known.startsWith(`${name}_`));
  if (extended.length === 1) return extended[0];
  return nearest(name, KNOWN_VARIABLES, Math.max(2, Math.floor(name.length / 5)));
}

const PROTOCOL = '(TCP|UDP|SCTP)';
const URL_VALUE = /^(tcp|udp|sctp):\/\/\S+:\d+$/;
const PORT_VALUE = /^\d{1,5}$/;
const PROTO_VALUE = /^(tcp|udp|sctp)$/;
const isAddress = (value: string): boolean => isIP(value) !== 0;

/**
 * The shapes of Kubernetes' service environment variables (the docker-links form included), each
 * with the shape of its value, so a variable only looks like one when both match:
 * `PROXY_PORT=8081` is a typo worth naming, `PROXY_PORT=tcp://10.0.0.7:8080` a service link.
 */
const SERVICE_LINKS: readonly (readonly [RegExp, (value: string) => boolean])[] = [
  [/_SERVICE_HOST$/, isAddress],
  [/_SERVICE_PORT(_[A-Z0-9_]+)?$/, (value) => PORT_VALUE.test(value)],
  [/_PORT$/, (value) => URL_VALUE.test(value)],
  [new RegExp(`_PORT_\\d+_${PROTOCOL}$`), (value) => URL_VALUE.test(value)],
  [new RegExp(`_PORT_\\d+_${PROTOCOL}_PROTO$`), (value) => PROTO_VALUE.test(value)],
  [new RegExp(`_PORT_\\d+_${PROTOCOL}_PORT$`), (value) => PORT_VALUE.test(value)],
  [new RegExp(`_PORT_\\d+_${PROTOCOL}_ADDR$`), isAddress],
];

/** Whether `name=value` has the shape of a Kubernetes service link. */
export function isServiceLink(name: string, value: string): boolean {
  return SERVICE_LINKS.some(([shape, valueFits]) => shape.test(name) && valueFits(value.trim()));
}

/** Whether a variable name has one of the service-link shapes, whatever its value. */
export function hasServiceLinkName(name: string): boolean {
  return SERVICE_LINKS.some(([shape]) => shape.test(name));
}
