/**
 * Parsers of the quota guard's keys (docs/quota-guard.md): `upstream.rateLimit`, and the
 * `quota.*` keys of "Fair share between callers": a caller's name, the gateway-mode header, and
 * the weights and priorities of named callers.
 */
import { shown } from '../safe-text.js';
import {
  INVALID,
  listItems,
  pipe,
  text,
  type Invalid,
  type Parser,
  type Report,
} from './parsers.js';
import type { CallerPolicy, NamedCallerPolicy, RateLimit } from './types.js';

/** What a caller's name may hold (and a caller header must): it becomes a metric label and a field in the store. */
export const CALLER_NAME = /^[a-z0-9._-]{1,64}$/;

/** Most callers `quota.callers` may name: each is a metric label. */
export const MAX_CONFIGURED_CALLERS = 100;

const MAX_WEIGHT = 1_000;

/** Headers that hold credentials or route the request: never a caller's name. */
const NOT_A_CALLER_HEADER = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
]);

/**
 * `quota.caller`: `[a-z0-9._-]{1,64}`, upper case folded to lower, so any Kubernetes label value
 * (`[A-Za-z0-9._-]`, at most 63) given through the downward API is a valid name.
 */
export function callerName(): Parser<string> {
  return (raw, report) => {
    const name = typeof raw === 'string' ? raw.trim().toLowerCase() : undefined;
    if (name !== undefined && CALLER_NAME.test(name)) return name;
    report(`must be 1 to 64 of a-z, 0-9, ".", "_", "-" (got ${shown(raw)}), e.g. reports-ui`);
    return INVALID;
  };
}

/** `quota.callerHeader`: a header field name, compared in lower case. */
export function callerHeader(): Parser<string> {
  return (raw, report) => {
    const name = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
    if (!/^[a-z0-9!#$%&'*+.^_`|~-]{1,64}$/.test(name)) {
      report(`must be a header field name (got ${shown(raw)}), e.g. x-caller`);
      return INVALID;
    }
    if (NOT_A_CALLER_HEADER.has(name)) {
      report(`must not be ${name}: it carries credentials or framing, not a caller's name`);
      return INVALID;
    }
    return name;
  };
}

/** `name=weight[:interactive|batch]` (env) or `{name, weight, priority}` (YAML). */
function callerPolicy(
  item: unknown,
  where: string,
  report: Report,
): [string, CallerPolicy] | undefined {
  let name: unknown;
  let weight: unknown;
  let priority: unknown = 'interactive';
  if (typeof item === 'string') {
    const match = /^([^=]*)=([^:]*)(?::(.*))?$/.exec(item.trim());
    if (match === null) {
      report(`${where}: must be name=weight[:interactive|batch] (got ${shown(item)})`);
      return undefined;
    }
    name = match[1]!.trim();
    weight = /^\d{1,9}$/.test(match[2]!.trim()) ? Number(match[2]!.trim()) : match[2];
    priority = match[3]?.trim() ?? 'interactive';
  } else if (typeof item === 'object' && item !== null && !Array.isArray(item)) {
    const {
      name: n,
      weight: w,
      priority: p = 'interactive',
      ...rest
    } = item as Record<string, unknown>;
    const extra = Object.keys(rest);
    if (extra.length > 0) {
      report(`${where}: has only name, weight and priority (unknown: ${extra.join(', ')})`);
      return undefined;
    }
    [name, weight, priority] = [n, w, p];
  } else {
    report(`${where}: must be name=weight[:priority] or a mapping {name, weight, priority}`);
    return undefined;
  }
  let ok = true;
  if (typeof name !== 'string' || !CALLER_NAME.test(name)) {
    report(`${where}: the name must be 1 to 64 of a-z, 0-9, ".", "_", "-" (got ${shown(name)})`);
    ok = false;
  }
  if (
    typeof weight !== 'number' ||
    !Number.isInteger(weight) ||
    weight < 1 ||
    weight > MAX_WEIGHT
  ) {
    report(
      `${where}: the weight must be a whole number from 1 to ${MAX_WEIGHT} (got ${shown(weight)})`,
    );
    ok = false;
  }
  if (priority !== 'interactive' && priority !== 'batch') {
    report(`${where}: the priority must be interactive or batch (got ${shown(priority)})`);
    ok = false;
  }
  return ok
    ? [name as string, { weight: weight as number, priority: priority as CallerPolicy['priority'] }]
    : undefined;
}

/**
 * `quota.callers`: env `name=weight[:priority],...`; YAML a list of `{name, weight, priority}`.
 * Every caller's every problem is reported, each naming its position (1-based).
 */
export function callerPolicies(): Parser<NamedCallerPolicy[]> {
  return (raw, report) => {
    const items = listItems(raw);
    if (items === null) {
      report(
        'must be name=weight[:interactive|batch],... or a YAML list of {name, weight, priority}',
      );
      return INVALID;
    }
    if (items.length > MAX_CONFIGURED_CALLERS) {
      report(
        `names ${items.length} callers; at most ${MAX_CONFIGURED_CALLERS} (each is a metric label)`,
      );
      return INVALID;
    }
    const policies = new Map<string, CallerPolicy>();
    let ok = true;
    items.forEach((item, i) => {
      const where = `caller ${i + 1}`;
      const entry = callerPolicy(item, where, report);
      if (entry === undefined) ok = false;
      else if (policies.has(entry[0])) {
        report(`${where}: names the caller ${entry[0]} twice`);
        ok = false;
      } else policies.set(entry[0], entry[1]);
    });
    return ok ? [...policies].map(([name, policy]) => ({ name, ...policy })) : INVALID;
  };
}

/** `upstream.rateLimit`: `N/s`, `N/m` or `N/h` (docs/configuration.md "Upstream (the API)"). */
const RATE_PERIODS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000 };

export function rateLimit(): Parser<RateLimit> {
  return pipe(text('N/s, N/m or N/h, e.g. 500/h'), (raw, report): RateLimit | Invalid => {
    const match = /^(\d{1,9})\s*\/\s*([smh])$/i.exec(raw);
    const count = match === null ? 0 : Number(match[1]);
    const periodMs = match === null ? undefined : RATE_PERIODS[(match[2] ?? '').toLowerCase()];
    if (periodMs === undefined || count < 1) {
      report(`must be N/s, N/m or N/h with N at least 1, e.g. 500/h (got ${shown(raw)})`);
      return INVALID;
    }
    return { count, periodMs };
  });
}
