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

/**
 * Seconds an answer may be served from the cache: the rule's TTL, or the answer's `s-maxage`
 * (shared caches prefer it, RFC 9111 §5.2.2.10) or `max-age` when smaller. 0 means "do not
 * store": `no-store`, an unqualified `no-cache` (every use would need revalidation, which this
 * cache does not do), or a freshness directive that is not a non-negative integer.
 */
export function storableSeconds(ruleSeconds: number, cacheControl: HeaderValue): number {
  if (cacheControl === undefined) return ruleSeconds;
  const directives = parseCacheControl(cacheControl);
  if (directives.has('no-store') || directives.get('no-cache') === '') return 0;
  const given = directives.get('s-maxage') ?? directives.get('max-age');
  if (given === undefined) return ruleSeconds;
  if (!/^\d+$/.test(given)) return 0;
  return Math.min(ruleSeconds, Number(given));
}

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
