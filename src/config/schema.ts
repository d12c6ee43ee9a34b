/**
 * The configuration schema: one entry per key, naming its environment variable and the zod schema
 * that turns a raw value (a string from the environment, or whatever YAML produced) into the typed
 * value. Every message says what is expected; a value is echoed only when it cannot be a secret.
 * Cross-key rules (https vs `allowInsecureHttp`, the credential source) live in `load.ts`.
 */
import { isIPv6 } from 'node:net';
import { z } from 'zod';
import { DEFAULT_LISTEN_HOST } from './defaults.js';
import type { ClientAuth, HostPort, LogLevel, TokenFormat } from './types.js';

/** Show a rejected (non-secret) value, shortened so a pasted blob cannot flood the terminal. */
export function shown(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const clipped = text.length > 60 ? `${text.slice(0, 57)}...` : text;
  return JSON.stringify(clipped);
}

const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** Environment values are strings; YAML may already have produced a number. */
function toNumber(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  const trimmed = raw.trim();
  return NUMERIC.test(trimmed) ? Number(trimmed) : raw;
}

/** A whole number in `[min, max]`; the message repeats the range whatever went wrong. */
function integer(min: number, max: number, unit: string) {
  const message = (issue: { input?: unknown }): string =>
    `must be a whole number of ${unit} from ${min} to ${max} (got ${shown(issue.input)})`;
  return z.preprocess(
    toNumber,
    z
      .number({ error: message })
      .int({ error: message })
      .min(min, { error: message })
      .max(max, { error: message }),
  );
}

/** A number strictly between 0 and 1. */
function fraction() {
  const message = (issue: { input?: unknown }): string =>
    `must be a number greater than 0 and less than 1, e.g. 0.2 (got ${shown(issue.input)})`;
  return z.preprocess(
    toNumber,
    z.number({ error: message }).gt(0, { error: message }).lt(1, { error: message }),
  );
}

const TRUE = new Set(['true', '1', 'yes']);
const FALSE = new Set(['false', '0', 'no']);

/** true/false/1/0/yes/no, any case; YAML booleans too. */
function boolean() {
  return z.unknown().transform((raw, ctx): boolean => {
    if (typeof raw === 'boolean') return raw;
    const text = typeof raw === 'string' || typeof raw === 'number' ? String(raw).trim() : '';
    if (TRUE.has(text.toLowerCase())) return true;
    if (FALSE.has(text.toLowerCase())) return false;
    ctx.addIssue(`must be true or false (1/0 and yes/no also accepted) (got ${shown(raw)})`);
    return z.NEVER;
  });
}

/** One of a fixed set of words, case-insensitive. */
function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  const message = (issue: { input?: unknown }): string =>
    `must be one of ${values.join(', ')} (got ${shown(issue.input)})`;
  return z.preprocess(
    (raw) => (typeof raw === 'string' ? raw.trim().toLowerCase() : raw),
    z.enum(values, { error: message }),
  );
}

/** A comma list (environment or YAML string) or a YAML sequence of strings; trimmed, empties dropped. */
function list() {
  return z.unknown().transform((raw, ctx): string[] => {
    const items =
      typeof raw === 'string' ? raw.split(',') : Array.isArray(raw) ? (raw as unknown[]) : null;
    if (items === null || items.some((item) => typeof item !== 'string')) {
      ctx.addIssue('must be a comma-separated list or a YAML list of strings');
      return z.NEVER;
    }
    return (items as string[]).map((item) => item.trim()).filter((item) => item !== '');
  });
}

/** A non-empty string that is not a secret (a path, a URL without credentials). */
function text(what: string) {
  return z.unknown().transform((raw, ctx): string => {
    if (typeof raw !== 'string' || raw.trim() === '') {
      ctx.addIssue(`must be ${what}`);
      return z.NEVER;
    }
    return raw.trim();
  });
}

/** A secret string: never echoed, not even its type's value. */
function secret() {
  return z.unknown().transform((raw, ctx): string => {
    if (typeof raw !== 'string') {
      ctx.addIssue('must be a string (quote it in YAML)');
      return z.NEVER;
    }
    if (raw.trim() === '') {
      ctx.addIssue('must not be empty');
      return z.NEVER;
    }
    return raw.trim();
  });
}

/**
 * Parse an absolute http(s) URL and report credentials or a fragment in it; messages never echo
 * the URL (it may hold a password). `ok` is false when something was reported.
 */
function parseHttpUrl(raw: string, ctx: z.RefinementCtx): { url: URL; ok: boolean } | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    ctx.addIssue('must be an absolute URL such as https://api.sparkcommodities.com');
    return null;
  }
  let ok = true;
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    ctx.addIssue(`must use https:// (got scheme ${shown(url.protocol)})`);
    ok = false;
  }
  if (url.username !== '' || url.password !== '') {
    // The value may hold a password: say what is wrong without repeating it.
    ctx.addIssue('must not contain credentials (user:password@); configure credentials.* instead');
    ok = false;
  }
  if (url.hash !== '' || raw.includes('#')) {
    ctx.addIssue('must not contain a fragment (#...)');
    ok = false;
  }
  return { url, ok };
}

/** `upstream.baseUrl`: origin only. Output: the origin, no trailing slash. */
function baseUrl() {
  return text('an https:// URL such as https://api.sparkcommodities.com').transform(
    (raw, ctx): URL => {
      const parsed = parseHttpUrl(raw, ctx);
      if (parsed === null) return z.NEVER;
      const { url } = parsed;
      let ok = parsed.ok;
      if (url.pathname !== '/' && url.pathname !== '') {
        ctx.addIssue(
          `must be an origin only (https://host[:port]); remove the path ${shown(url.pathname)} (use upstream.pathPrefixes for forwarded paths)`,
        );
        ok = false;
      }
      if (url.search !== '' || raw.includes('?')) {
        ctx.addIssue('must not contain a query string (?...)');
        ok = false;
      }
      return ok ? new URL(url.origin) : z.NEVER;
    },
  );
}

/** `token.url`: any path allowed. */
function endpointUrl() {
  return text('an https:// URL such as https://api.sparkcommodities.com/oauth/token/').transform(
    (raw, ctx): URL => {
      const parsed = parseHttpUrl(raw, ctx);
      return parsed?.ok === true ? parsed.url : z.NEVER;
    },
  );
}

/** `upstream.pathPrefixes`: each starts with `/`, ends with `/` (added), no dot segments. */
function pathPrefixes() {
  return list().transform((items, ctx): string[] => {
    if (items.length === 0) {
      ctx.addIssue('must name at least one path prefix, e.g. /v1.0/');
      return z.NEVER;
    }
    const out: string[] = [];
    for (const item of items) {
      if (!item.startsWith('/')) {
        ctx.addIssue(`each prefix must start with "/" (got ${shown(item)})`);
      } else if (item.split('/').some((segment) => segment === '..' || segment === '.')) {
        ctx.addIssue(`a prefix must not contain "." or ".." segments (got ${shown(item)})`);
      } else if (/[\s?#\\%]/.test(item)) {
        ctx.addIssue(
          `a prefix must not contain whitespace, "?", "#", "\\" or "%" (got ${shown(item)})`,
        );
      } else {
        const normalised = item.endsWith('/') ? item : `${item}/`;
        if (!out.includes(normalised)) out.push(normalised);
      }
    }
    return out;
  });
}

/** `token.scopes`: RFC 6749 §3.3 scope tokens, so no whitespace, quote or backslash inside one. */
function scopes() {
  return list().transform((items, ctx): string[] => {
    for (const item of items) {
      if (/[\s"\\]/.test(item)) {
        ctx.addIssue(`scopes are comma-separated; ${shown(item)} contains whitespace, '"' or '\\'`);
        return z.NEVER;
      }
    }
    return items;
  });
}

const HOSTNAME = /^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/;

/** `host:port`, `[v6]:port` or `:port` (all interfaces, IPv4), port 0..65535. */
export function parseListen(raw: string): HostPort | string {
  const expected = `must be host:port, [ipv6]:port or :port (got ${shown(raw)})`;
  const match = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/.exec(raw.trim());
  if (match === null) return expected;
  const [, v6, name, portText] = match;
  const port = Number(portText);
  if (port > 65_535) return `port must be from 0 to 65535 (got ${shown(raw)})`;
  if (v6 !== undefined) {
    return isIPv6(v6) ? { host: v6, port } : `${shown(v6)} is not an IPv6 address; ${expected}`;
  }
  if (name === undefined || name === '') return { host: DEFAULT_LISTEN_HOST, port };
  return HOSTNAME.test(name) ? { host: name, port } : expected;
}

function listen() {
  return text('host:port, [ipv6]:port or :port, e.g. 127.0.0.1:8080').transform(
    (raw, ctx): HostPort => {
      const parsed = parseListen(raw);
      if (typeof parsed === 'string') {
        ctx.addIssue(parsed);
        return z.NEVER;
      }
      return parsed;
    },
  );
}

const TOKEN_FORMATS = ['json', 'form'] as const satisfies readonly TokenFormat[];
const CLIENT_AUTHS = ['body', 'basic'] as const satisfies readonly ClientAuth[];
const LOG_LEVELS = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
] as const satisfies readonly LogLevel[];

/** One configuration key: its environment variable and the schema for its raw value. */
export interface FieldSpec<T> {
  env: string;
  schema: z.ZodType<T>;
  /** Never echo the value, in any message. */
  secret: boolean;
}

function field<T>(env: string, schema: z.ZodType<T>, secret = false): FieldSpec<T> {
  return { env, schema, secret };
}

/**
 * Every configuration key, by its dotted YAML path. The YAML file may hold exactly these keys;
 * anything else is reported as unknown.
 */
export const FIELDS = {
  'upstream.baseUrl': field('UPSTREAM_BASE_URL', baseUrl()),
  'upstream.pathPrefixes': field('UPSTREAM_PATH_PREFIXES', pathPrefixes()),
  'upstream.caFile': field('UPSTREAM_CA_FILE', text('a path to a PEM CA bundle')),
  'upstream.timeoutMs': field('UPSTREAM_TIMEOUT_MS', integer(1, 600_000, 'milliseconds')),
  'upstream.allowInsecureHttp': field('UPSTREAM_ALLOW_INSECURE_HTTP', boolean()),
  'upstream.http2': field('UPSTREAM_HTTP2', boolean()),
  'token.url': field('TOKEN_URL', endpointUrl()),
  'token.format': field('TOKEN_REQUEST_FORMAT', oneOf(TOKEN_FORMATS)),
  'token.clientAuth': field('TOKEN_CLIENT_AUTH', oneOf(CLIENT_AUTHS)),
  'token.scopes': field('TOKEN_SCOPES', scopes()),
  'token.timeoutMs': field('TOKEN_TIMEOUT_MS', integer(1, 600_000, 'milliseconds')),
  'token.waitMs': field('TOKEN_WAIT_MS', integer(0, 600_000, 'milliseconds')),
  'token.refreshMarginSeconds': field(
    'TOKEN_REFRESH_MARGIN_SECONDS',
    integer(0, 86_400, 'seconds'),
  ),
  'token.refreshFraction': field('TOKEN_REFRESH_FRACTION', fraction()),
  'credentials.clientId': field('CLIENT_ID', secret(), true),
  'credentials.clientSecret': field('CLIENT_SECRET', secret(), true),
  'credentials.clientIdFile': field('CLIENT_ID_FILE', text('a path to a file')),
  'credentials.clientSecretFile': field('CLIENT_SECRET_FILE', text('a path to a file')),
  'credentials.csvFile': field('CLIENT_CREDENTIALS_CSV', text('a path to a CSV file')),
  'proxy.listen': field('PROXY_LISTEN', listen()),
  'proxy.http2': field('PROXY_HTTP2', boolean()),
  'admin.listen': field('ADMIN_LISTEN', listen()),
  'log.level': field('LOG_LEVEL', oneOf(LOG_LEVELS)),
} as const;

export type FieldKey = keyof typeof FIELDS;

/** The parsed value of each key, `undefined` when no layer set it (or it was invalid). */
export type FieldValues = {
  [K in FieldKey]: (typeof FIELDS)[K] extends FieldSpec<infer T> ? T | undefined : never;
};

/** `UPSTREAM_BASE_URL (upstream.baseUrl)`: how every problem line starts. */
export function label(key: FieldKey): string {
  return `${FIELDS[key].env} (${key})`;
}
