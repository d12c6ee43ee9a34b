/**
 * Parsers of the `store.*` values (docs/configuration.md "Shared token store"): the mode, the URL
 * (a secret: no message repeats it), the Sentinel primary's name and the key prefix. Cross-key
 * rules of the mode live in store-config.ts.
 */
import { shown } from '../safe-text.js';
import { parseStoreUrl } from '../store-url.js';
import { INVALID, pipe, text, type Invalid, type Parser } from './parsers.js';
import type { StoreMode } from './types.js';

export const STORE_MODES = [
  'standalone',
  'cluster',
  'sentinel',
] as const satisfies readonly StoreMode[];

/**
 * `store.url` (alias `token.store.url`): a `redis://` or `rediss://` URL naming one host, or several
 * (comma-separated) for `store.mode` cluster or sentinel. It may hold a password, so no message
 * ever repeats it (the field is secret).
 */
export function storeUrl(): Parser<string> {
  return (raw, report) => {
    const expected =
      'must be a redis:// or rediss:// URL, e.g. rediss://user:password@redis:6380/0 (several hosts: redis://a:6379,b:6379)';
    if (typeof raw !== 'string' || raw.trim() === '') {
      report(expected);
      return INVALID;
    }
    const parsed = parseStoreUrl(raw);
    if ('problem' in parsed) {
      report(`${expected} (${parsed.problem})`);
      return INVALID;
    }
    return raw.trim();
  };
}

/** `store.sentinelPrimary`: the name the sentinels know the primary by. */
export function sentinelPrimary(): Parser<string> {
  return pipe(text('the name of the primary the sentinels watch'), (raw, report) => {
    if (!/^[\x21-\x7e]{1,128}$/.test(raw)) {
      report(`must be 1 to 128 printable ASCII characters without spaces (got ${shown(raw)})`);
      return INVALID;
    }
    return raw;
  });
}

/** `token.store.keyPrefix`: printable, no whitespace, at most 64 characters. */
export function keyPrefix(): Parser<string> {
  return pipe(text('a key prefix such as oauth-sidecar:'), (raw, report): string | Invalid => {
    if (!/^[\x21-\x7e]{1,64}$/.test(raw)) {
      report(`must be 1 to 64 printable ASCII characters without spaces (got ${shown(raw)})`);
      return INVALID;
    }
    return raw;
  });
}
