/**
 * `Cache-Control` (RFC 9111 §5.2) with the request directives and `Pragma` (§5.4), and `Vary`
 * (RFC 9110 §12.5.5). Pure functions on field values as node and undici hand them over.
 */

/** One field value; a repeated field arrives as an array. */
export type FieldValue = string | string[] | number | undefined;

/** The field's values as one comma-separated list (RFC 9110 §5.3). */
export function fieldList(value: FieldValue): string {
  if (value === undefined) return '';
  return Array.isArray(value) ? value.join(',') : String(value);
}

/** Directive name (lower-cased) to its argument (`''` when it has none), quotes removed. */
export function parseCacheControl(value: FieldValue): Map<string, string> {
  const directives = new Map<string, string>();
  for (const part of fieldList(value).split(',')) {
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

/** What a client's request asks of a cache. */
export type RequestDirective = 'no-store' | 'no-cache' | 'none';

/**
 * `no-store` bypasses the cache both ways; `no-cache`, `max-age=0` or `Pragma: no-cache`
 * (RFC 9111 §5.4) go upstream and refresh the entry.
 */
export function requestDirective(cacheControl: FieldValue, pragma: FieldValue): RequestDirective {
  if (cacheControl !== undefined) {
    const directives = parseCacheControl(cacheControl);
    if (directives.has('no-store')) return 'no-store';
    if (directives.has('no-cache') || directives.get('max-age') === '0') return 'no-cache';
  }
  if (pragma !== undefined && parseCacheControl(pragma).has('no-cache')) return 'no-cache';
  return 'none';
}

/**
 * Field names an answer's `Vary` lists, lower-cased and sorted; `undefined` for `Vary: *`,
 * which makes the answer unusable for any later request (RFC 9111 §4.1).
 */
export function varyFields(value: FieldValue): string[] | undefined {
  const names = new Set<string>();
  for (const part of fieldList(value).split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '*') return undefined;
    if (name) names.add(name);
  }
  return [...names].sort();
}
