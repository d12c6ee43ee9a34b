/**
 * Constants of the configuration that are not a key's default (those sit beside each field in
 * `schema.ts`'s `FIELDS` table).
 */

/** Path of the token endpoint under the base URL when `token.url` is not set (spec §4.1). */
export const DEFAULT_TOKEN_PATH = '/oauth/token/';

/** Host used for a listen address written as `:port`. */
export const DEFAULT_LISTEN_HOST = '0.0.0.0';

/** Example shown when `upstream.baseUrl` is missing. */
export const EXAMPLE_BASE_URL = 'https://api.sparkcommodities.com';
