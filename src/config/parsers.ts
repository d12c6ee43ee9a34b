/**
 * Parsers of raw configuration values (a string from the environment, or whatever YAML produced).
 * Every message says what is expected; a value is echoed only when it cannot be a secret. Plain
 * functions, not a schema library: one costs idle RSS for nothing here (docs/design.md
 * "Dependencies").
 */
import { isIPv6 } from 'node:net';
import { shown } from '../safe-text.js';
import { DEFAULT_LISTEN_HOST } from './defaults.js';
import type { ClientAuth, HostPort, LogLevel, TokenFormat } from './types.js';

/** What a parser returns when the value is unusable (after reporting why). */
export const INVALID: unique symbol = Symbol('invalid');
export type Invalid = typeof INVALID;

/** Receives one problem message; a parser may report several before it returns. */
export type Report = (message: string) => void;

/**
 * What a value may be in the YAML file, as JSON Schema: the parser's own description of what it
 * accepts, read by src/config/json-schema.ts (config/oauth-sidecar.schema.json).
 */
export type Shape = Readonly<Record<string, unknown>>;

/**
 * Turns one raw value into `T`; any reported problem makes the value invalid. `shape` says what it
 * accepts from YAML (set by {@link shaped}).
 */
export type Parser<T> = ((raw: unknown, report: Report) => T | Invalid) & {
  readonly shape?: Shape;
};

/** `parse`, described for the JSON Schema by `shape`. */
export function shaped<T>(
  shape: Shape,
  parse: (raw: unknown, report: Report) => T | Invalid,
): Parser<T> {
  return Object.assign(parse, { shape });
}

/** A non-empty YAML string. */
export const STRING_SHAPE: Shape = { type: 'string', minLength: 1 };
/** A comma list in one string, or a YAML sequence of strings. */
export const LIST_SHAPE: Shape = {
  anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }],
};

/** The value, or every problem the parser reported (at least one). */
export function parseValue<T>(
  parser: Parser<T>,
  raw: unknown,
): { ok: true; value: T } | { ok: false; problems: string[] } {
  const problems: string[] = [];
  const value = parser(raw, (message) => problems.push(message));
  if (value === INVALID || problems.length > 0) {
    return { ok: false, problems: problems.length > 0 ? problems : ['is invalid'] };
  }
  return { ok: true, value };
}

/** `first`, then `next` on its value; `next` never runs after `first` reported a problem. */
export function pipe<A, B>(
  first: Parser<A>,
  next: (value: A, report: Report) => B | Invalid,
): Parser<B> {
  return shaped(first.shape ?? {}, (raw, report) => {
    let failed = false;
    const value = first(raw, (message) => {
      failed = true;
      report(message);
    });
    return failed || value === INVALID ? INVALID : next(value, report);
  });
}

const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** Environment values are strings; YAML may already have produced a number. */
export function toNumber(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  const trimmed = raw.trim();
  return NUMERIC.test(trimmed) ? Number(trimmed) : raw;
}

/** A whole number in `[min, max]`; the message repeats the range whatever went wrong. */
export function integer(min: number, max: number, unit: string): Parser<number> {
  const shape = { type: 'integer', minimum: min, maximum: max, description: unit };
  return shaped(shape, (raw, report) => {
    const value = toNumber(raw);
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max) {
      return value;
    }
    report(`must be a whole number of ${unit} from ${min} to ${max} (got ${shown(value)})`);
    return INVALID;
  });
}

/** A number strictly between 0 and 1. */
export function fraction(): Parser<number> {
  return shaped({ type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 }, (raw, report) => {
    const value = toNumber(raw);
    if (typeof value === 'number' && value > 0 && value < 1) return value;
    report(`must be a number greater than 0 and less than 1, e.g. 0.2 (got ${shown(value)})`);
    return INVALID;
  });
}

const TRUE = new Set(['true', '1', 'yes']);
const FALSE = new Set(['false', '0', 'no']);

/** true/false/1/0/yes/no, any case; YAML booleans too. */
export function boolean(): Parser<boolean> {
  return shaped({ type: 'boolean' }, (raw, report) => {
    if (typeof raw === 'boolean') return raw;
    const text = typeof raw === 'string' || typeof raw === 'number' ? String(raw).trim() : '';
    if (TRUE.has(text.toLowerCase())) return true;
    if (FALSE.has(text.toLowerCase())) return false;
    report(`must be true or false (1/0 and yes/no also accepted) (got ${shown(raw)})`);
    return INVALID;
  });
}

/** One of a fixed set of words, case-insensitive. */
export function oneOf<const T extends readonly [string, ...string[]]>(
  values: T,
): Parser<T[number]> {
  return shaped({ enum: [...values] }, (raw, report) => {
    const value = typeof raw === 'string' ? raw.trim().toLowerCase() : raw;
    const found = values.find((candidate) => candidate === value);
    if (found !== undefined) return found;
    report(`must be one of ${values.join(', ')} (got ${shown(value)})`);
    return INVALID;
  });
}

/** A comma list (environment or YAML string) or a YAML sequence of strings; trimmed, empties dropped. */
export function list(): Parser<string[]> {
  return shaped(LIST_SHAPE, (raw, report) => {
    const items =
      typeof raw === 'string' ? raw.split(',') : Array.isArray(raw) ? (raw as unknown[]) : null;
    if (items === null || items.some((item) => typeof item !== 'string')) {
      report('must be a comma-separated list or a YAML list of strings');
      return INVALID;
    }
    return (items as string[]).map((item) => item.trim()).filter((item) => item !== '');
  });
}

/** A non-empty string that is not a secret (a path, a URL without credentials). */
export function text(what: string): Parser<string> {
  return shaped({ ...STRING_SHAPE, description: what }, (raw, report) => {
    if (typeof raw !== 'string' || raw.trim() === '') {
      report(`must be ${what}`);
      return INVALID;
    }
    return raw.trim();
  });
}

/** A secret string: never echoed, not even its type's value. */
export function secret(): Parser<string> {
  return shaped(STRING_SHAPE, (raw, report) => {
    if (typeof raw !== 'string') {
      report('must be a string (quote it in YAML)');
      return INVALID;
    }
    if (raw.trim() === '') {
      report('must not be empty');
      return INVALID;
    }
    return raw.trim();
  });
}

/**
 * Parse an absolute http(s) URL and report credentials or a fragment in it; messages never echo
 * the URL (it may hold a password). `ok` is false when something was reported.
 */
function parseHttpUrl(raw: string, report: Report): { url: URL; ok: boolean } | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    report('must be an absolute URL such as https://api.sparkcommodities.com');
    return null;
  }
  let ok = true;
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    report(`must use https:// (got scheme ${shown(url.protocol)})`);
    ok = false;
  }
  if (url.username !== '' || url.password !== '') {
    // The value may hold a password: say what is wrong without repeating it.
    report('must not contain credentials (user:password@); configure credentials.* instead');
    ok = false;
  }
  if (url.hash !== '' || raw.includes('#')) {
    report('must not contain a fragment (#...)');
    ok = false;
  }
  return { url, ok };
}

/** `upstream.baseUrl`: origin only. Output: the origin, no trailing slash. */
export function baseUrl(): Parser<URL> {
  return pipe(
    text('an https:// URL such as https://api.sparkcommodities.com'),
    (raw, report): URL | Invalid => {
      const parsed = parseHttpUrl(raw, report);
      if (parsed === null) return INVALID;
      const { url } = parsed;
      let ok = parsed.ok;
      if (url.pathname !== '/' && url.pathname !== '') {
        report(
          `must be an origin only (https://host[:port]); remove the path ${shown(url.pathname)} (use upstream.pathPrefixes for forwarded paths)`,
        );
        ok = false;
      }
      if (url.search !== '' || raw.includes('?')) {
        report('must not contain a query string (?...)');
        ok = false;
      }
      return ok ? new URL(url.origin) : INVALID;
    },
  );
}

/** `token.url`: any path allowed. */
export function endpointUrl(): Parser<URL> {
  return pipe(
    text('an https:// URL such as https://api.sparkcommodities.com/oauth/token/'),
    (raw, report): URL | Invalid => {
      const parsed = parseHttpUrl(raw, report);
      return parsed?.ok === true ? parsed.url : INVALID;
    },
  );
}

/** `upstream.pathPrefixes`: each starts with `/`, ends with `/` (added), no dot segments. */
export function pathPrefixes(): Parser<string[]> {
  return pipe(list(), (items, report): string[] | Invalid => {
    if (items.length === 0) {
      report('must name at least one path prefix, e.g. /v1.0/');
      return INVALID;
    }
    const out: string[] = [];
    for (const item of items) {
      if (!item.startsWith('/')) {
        report(`each prefix must start with "/" (got ${shown(item)})`);
      } else if (item.split('/').some((segment) => segment === '..' || segment === '.')) {
        report(`a prefix must not contain "." or ".." segments (got ${shown(item)})`);
      } else if (/[\s?#\\%]/.test(item)) {
        report(`a prefix must not contain whitespace, "?", "#", "\\" or "%" (got ${shown(item)})`);
      } else {
        const normalised = item.endsWith('/') ? item : `${item}/`;
        if (!out.includes(normalised)) out.push(normalised);
      }
    }
    return out;
  });
}

/** `token.scopes`: RFC 6749 §3.3 scope tokens, so no whitespace, quote or backslash inside one. */
export function scopes(): Parser<string[]> {
  return pipe(list(), (items, report): string[] | Invalid => {
    for (const item of items) {
      if (/[\s"\\]/.test(item)) {
        report(`scopes are comma-separated; ${shown(item)} contains whitespace, '"' or '\\'`);
        return INVALID;
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

export function listen(): Parser<HostPort> {
  return pipe(
    text('host:port, [ipv6]:port or :port, e.g. 127.0.0.1:8080'),
    (raw, report): HostPort | Invalid => {
      const parsed = parseListen(raw);
      if (typeof parsed === 'string') {
        report(parsed);
        return INVALID;
      }
      return parsed;
    },
  );
}

export const TOKEN_FORMATS = ['json', 'form'] as const satisfies readonly TokenFormat[];
export const CLIENT_AUTHS = ['body', 'basic'] as const satisfies readonly ClientAuth[];
export const LOG_LEVELS = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
] as const satisfies readonly LogLevel[];

/** The items of a list key: a comma list from the environment (trimmed, empties dropped) or a YAML sequence; null for anything else. */
export function listItems(raw: unknown): unknown[] | null {
  if (typeof raw === 'string') {
    return raw
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '');
  }
  return Array.isArray(raw) ? (raw as unknown[]) : null;
}
