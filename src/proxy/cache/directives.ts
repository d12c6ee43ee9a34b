/**
 * The few header grammars the response cache reads (RFC 9111 §5.2 Cache-Control, §5.4 Pragma,
 * RFC 9110 §12.5.5 Vary). Pure functions on header values as node parsed them.
 */

type HeaderValue = string | string[] | number | undefined;

function joined(value: HeaderValue): string {
  if (value === undefined) return '';
  return Array.isArray(value) ? value.join(',') : String(value);
}

/** Directive name (lower-cased) to its argument (`''` when it has none), quotes removed. */
export function parseCacheControl(value: HeaderValue): Map<string, string> {
  const directives = new Map<string, string>();
  for (const part of joined(value).split(',')) {
    const at = part.indexOf('=');
    const name = (at === -1 ? part : part.slice(0, at)).trim().toLowerCase();
    if (!name) continue;
    const arg =
      at === -1
        ? ''
        : part
            .slice(at + 1)
            .trim()
            .replace(/^"(.*)"$/, '$1');
    // RFC 9111 §4.2.1: with a directive repeated, the first one wins (the conservative reading).
    if (!directives.has(name)) directives.set(name, arg);
  }
  return directives;
}

/** What a client's request asks of the cache. */
export type RequestDirective = 'no-store' | 'no-cache' | 'none';

/**
 * `no-store` bypasses the cache both ways; `no-cache` (or `Pragma: no-cache`, RFC 9111 §5.4)
 * goes upstream and refreshes the entry.
 */
export function requestDirective(cacheControl: HeaderValue, pragma: HeaderValue): RequestDirective {
  if (cacheControl !== undefined) {
    const directives = parseCacheControl(cacheControl);
    if (directives.has('no-store')) return 'no-store';
    if (directives.has('no-cache') || directives.get('max-age') === '0') return 'no-cache';
  }
  if (pragma !== undefined && parseCacheControl(pragma).has('no-cache')) return 'no-cache';
  return 'none';
}

/** What of an answer decides whether and how long it is stored. */
export interface AnswerFreshness {
  cacheControl: HeaderValue;
  expires?: HeaderValue;
  date?: HeaderValue;
}

/**
 * Seconds an answer may be served from the cache: the rule's TTL, or the answer's `s-maxage`
 * (shared caches prefer it, RFC 9111 §5.2.2.10) or `max-age` when smaller. 0 means "do not
 * store": `no-store`, `private` (this cache is shared by every caller, RFC 9111 §5.2.2.7), an
 * unqualified `no-cache` (every use would need revalidation, which this cache does not do), a
 * freshness directive that is not a non-negative integer, or, without one, an `Expires` already
 * past (or invalid, which RFC 9111 §5.3 reads as past) at the answer's `Date` (else `nowMs`).
 */
export function storableSeconds(
  ruleSeconds: number,
  answer: AnswerFreshness,
  nowMs: number,
): number {
  const directives = parseCacheControl(answer.cacheControl);
  if (directives.has('no-store') || directives.has('private')) return 0;
  if (directives.get('no-cache') === '') return 0;
  const given = directives.get('s-maxage') ?? directives.get('max-age');
  if (given === undefined) return expiresPast(answer, nowMs) ? 0 : ruleSeconds;
  if (!/^\d+$/.test(given)) return 0;
  return Math.min(ruleSeconds, Number(given));
}

function expiresPast(answer: AnswerFreshness, nowMs: number): boolean {
  if (answer.expires === undefined) return false;
  const expires = Date.parse(joined(answer.expires));
  if (!Number.isFinite(expires)) return true;
  const date = answer.date === undefined ? NaN : Date.parse(joined(answer.date));
  return expires <= (Number.isFinite(date) ? date : nowMs);
}

/** RFC 3986 §2.3 unreserved characters: percent-encoding them changes nothing (§6.2.2.2). */
const UNRESERVED = /[A-Za-z0-9\-._~]/;

/**
 * A path as the cache keys it: percent-encoded unreserved characters decoded and the hex of the
 * others upper-cased (RFC 3986 §6.2.2), so `/item/%61` and `/item/a` are one resource for
 * lookups and invalidation. The request goes upstream as the client wrote it.
 */
export function normalizedPath(path: string): string {
  if (!path.includes('%')) return path;
  return path.replace(/%([0-9A-Fa-f]{2})/g, (_match, hex: string) => {
    const char = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
  });
}

/** Request fields that tunnel another method through a GET: such a GET is never cached. */
export const METHOD_OVERRIDE_FIELDS = [
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
] as const;

/**
 * Field names an answer's `Vary` lists, lower-cased and sorted; `undefined` for `Vary: *`,
 * which makes the answer unusable for any later request (RFC 9111 §4.1).
 */
export function varyFields(value: HeaderValue): string[] | undefined {
  const names = new Set<string>();
  for (const part of joined(value).split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '*') return undefined;
    if (name) names.add(name);
  }
  return [...names].sort();
}

/** How long past its freshness an answer may still answer (RFC 5861), in seconds. */
export interface StaleWindows {
  ifError: number;
  whileRevalidate: number;
}

/**
 * The configured windows, narrowed by the answer's own `stale-if-error=N` and
 * `stale-while-revalidate=N` (the smaller wins). An answer that must be revalidated once stale
 * (`must-revalidate`, `proxy-revalidate`, or `s-maxage`, which carries proxy-revalidate for a shared
 * cache: RFC 9111 §5.2.2.10) is never served stale unless it grants a window itself, which is
 * the origin's explicit leave (RFC 5861 §3, §4). A malformed argument grants nothing.
 */
export function staleWindows(configured: StaleWindows, cacheControl: HeaderValue): StaleWindows {
  const directives = parseCacheControl(cacheControl);
  const strict =
    directives.has('must-revalidate') ||
    directives.has('proxy-revalidate') ||
    directives.has('s-maxage');
  const window = (name: string, limit: number): number => {
    const given = directives.get(name);
    if (given === undefined) return strict ? 0 : limit;
    return /^\d+$/.test(given) ? Math.min(limit, Number(given)) : 0;
  };
  return {
    ifError: window('stale-if-error', configured.ifError),
    whileRevalidate: window('stale-while-revalidate', configured.whileRevalidate),
  };
}
