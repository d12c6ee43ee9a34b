/**
 * Request fields that tunnel another method through the one sent (`X-HTTP-Method-Override` and
 * its kin, honoured by many web frameworks): a GET carrying one may act as a DELETE upstream. What
 * judges a request by its method judges these too: the cache never stores such a GET, and a
 * caller rule that limits methods must allow every method they name.
 */
import type { IncomingHttpHeaders } from 'node:http';

export const METHOD_OVERRIDE_FIELDS = [
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
] as const;

/**
 * The first override field in `headers` naming a method `allowed` does not hold (each
 * comma-separated item, upper-cased), or undefined when there is none. Only the field's name is
 * returned: its value is the client's, never echoed.
 */
export function overrideOutside(
  headers: IncomingHttpHeaders,
  allowed: readonly string[],
): { field: string } | undefined {
  for (const field of METHOD_OVERRIDE_FIELDS) {
    const value = headers[field];
    if (value === undefined) continue;
    for (const item of (Array.isArray(value) ? value.join(',') : value).split(',')) {
      if (!allowed.includes(item.trim().toUpperCase())) return { field };
    }
  }
  return undefined;
}
