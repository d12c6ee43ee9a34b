/**
 * The response cache's rules on the fields' values (RFC 9111): whether and how long an answer is
 * stored, how long it may answer stale, how a path is keyed. The field grammars are
 * http-fields/cache-control.ts's.
 */
import { fieldList, parseCacheControl, type FieldValue } from '../../http-fields/cache-control.js';

/** What of an answer decides whether and how long it is stored. */
export interface AnswerFreshness {
  cacheControl: FieldValue;
  expires?: FieldValue;
  date?: FieldValue;
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
  const expires = Date.parse(fieldList(answer.expires));
  if (!Number.isFinite(expires)) return true;
  const date = answer.date === undefined ? NaN : Date.parse(fieldList(answer.date));
  return expires <= (Number.isFinite(date) ? date : nowMs);
}

/** RFC 3986 §2.3 unreserved characters: percent-encoding them changes nothing (§6.2.2.2). */
const UNRESERVED = /[A-Za-z0-9\-._~]/;

function headerText(value: string | string[] | undefined): string {
  if (value === undefined) return '';
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The key of a request for `uri` (normalized path and query): with its `Accept` and `Accept-Encoding`. */
export function cacheKey(
  uri: string,
  headers: { accept?: string | string[]; 'accept-encoding'?: string | string[] },
): string {
  return `${uri}\n${headerText(headers.accept)}\n${headerText(headers['accept-encoding'])}`;
}

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
export function staleWindows(configured: StaleWindows, cacheControl: FieldValue): StaleWindows {
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
