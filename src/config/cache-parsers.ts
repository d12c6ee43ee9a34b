/**
 * Parser of `cache.rules` (docs/response-cache.md): env `PREFIX=SECONDS,...`, YAML a list of
 * `{prefix, ttlSeconds}` or such strings. Every bad rule is reported with its position (1-based),
 * none echoes more than itself.
 */
import { shown } from '../safe-text.js';
import { INVALID, listItems, type Parser, type Report } from './parsers.js';
import type { CacheRule } from './types.js';

/** The longest cache TTL a rule may name: one day (answers are data that changes). */
const MAX_CACHE_TTL_SECONDS = 86_400;

/** One `PREFIX=SECONDS` (env) or `{prefix, ttlSeconds}` (YAML) cache rule. */
function cacheRule(item: unknown, where: string, report: Report): CacheRule | undefined {
  let prefix: unknown;
  let ttl: unknown;
  if (typeof item === 'string') {
    const at = item.lastIndexOf('=');
    if (at < 0) {
      report(
        `${where}: must be PREFIX=SECONDS, e.g. /v1.0/contracts/=300 (got ${shown(item)}: no "=")`,
      );
      return undefined;
    }
    prefix = item.slice(0, at).trim();
    ttl = item.slice(at + 1).trim();
  } else if (typeof item === 'object' && item !== null && !Array.isArray(item)) {
    const { prefix: p, ttlSeconds, ...rest } = item as Record<string, unknown>;
    const extra = Object.keys(rest);
    if (extra.length > 0) {
      report(`${where}: has only prefix and ttlSeconds (unknown: ${extra.join(', ')})`);
      return undefined;
    }
    prefix = p;
    ttl = ttlSeconds;
  } else {
    report(`${where}: must be PREFIX=SECONDS or a mapping {prefix, ttlSeconds}`);
    return undefined;
  }
  const seconds = typeof ttl === 'string' && /^\d{1,9}$/.test(ttl) ? Number(ttl) : ttl;
  let ok = true;
  if (typeof prefix !== 'string' || !prefix.startsWith('/') || /[\s?#\\%]/.test(prefix)) {
    report(
      `${where}: the prefix must start with "/" and hold no whitespace, "?", "#", "\\" or "%" (got ${shown(prefix)})`,
    );
    ok = false;
  } else if (prefix.split('/').some((segment) => segment === '..' || segment === '.')) {
    report(`${where}: the prefix must not contain "." or ".." segments (got ${shown(prefix)})`);
    ok = false;
  }
  if (
    typeof seconds !== 'number' ||
    !Number.isInteger(seconds) ||
    seconds < 1 ||
    seconds > MAX_CACHE_TTL_SECONDS
  ) {
    report(
      `${where}: the TTL must be a whole number of seconds from 1 to ${MAX_CACHE_TTL_SECONDS} (got ${ttl === undefined ? 'no ttlSeconds' : shown(ttl)}), e.g. /v1.0/contracts/=300`,
    );
    ok = false;
  }
  return ok ? { prefix: prefix as string, ttlSeconds: seconds as number } : undefined;
}

/** `cache.rules`: env `PREFIX=SECONDS,...`; YAML a list of `{prefix, ttlSeconds}` (or strings). */
export function cacheRules(): Parser<CacheRule[]> {
  return (raw, report) => {
    const items = listItems(raw);
    if (items === null) {
      report('must be PREFIX=SECONDS,... or a YAML list of {prefix, ttlSeconds}');
      return INVALID;
    }
    const rules: CacheRule[] = [];
    items.forEach((item, i) => {
      const rule = cacheRule(item, `rule ${i + 1}`, report);
      if (rule !== undefined) rules.push(rule);
    });
    return rules.length === items.length ? rules : INVALID;
  };
}
