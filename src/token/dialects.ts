/**
 * The two request dialects of the token endpoint (docs/api-notes.md §4.1): how a grant
 * request becomes headers and a body. Pure functions, no I/O.
 */
import type { ClientAuth, TokenFormat } from '../config/types.js';
import type { ClientCredentials, GrantRequest } from './types.js';

export interface DialectOptions {
  /** `json`: the API's format A (camelCase); `form`: RFC 6749 / format B (snake_case). */
  format: TokenFormat;
  /** `body`: credentials in the body; `basic`: `Authorization: Basic ...` (RFC 6749 §2.3.1). */
  clientAuth: ClientAuth;
  /** Sent on client-credentials grants only; empty: nothing sent. */
  scopes: readonly string[];
}

/** What goes on the wire, apart from method and URL. */
export interface EncodedGrantRequest {
  headers: Record<string, string>;
  body: string;
}

export const JSON_CONTENT_TYPE = 'application/json';
export const FORM_CONTENT_TYPE = 'application/x-www-form-urlencoded';

/**
 * Builds the headers and body of one grant request.
 *
 * Refresh grants carry no client credentials at all, not even a Basic header with
 * `clientAuth: basic`: the API says a refresh exchange works without them (api-notes.md §4.1 rule 3), and
 * leaving them out means a refresh never spends the secret. Scopes are sent on client-credentials
 * grants only; a refresh without scope keeps the originally granted one (RFC 6749 §6).
 */
export function encodeGrantRequest(
  options: DialectOptions,
  request: GrantRequest,
): EncodedGrantRequest {
  const headers: Record<string, string> = { accept: JSON_CONTENT_TYPE };
  const fields: [string, string][] = [];
  const json = options.format === 'json';

  if (request.grant === 'client_credentials') {
    fields.push(json ? ['grantType', 'clientCredentials'] : ['grant_type', 'client_credentials']);
    if (options.clientAuth === 'basic') {
      headers.authorization = basicAuthorization(request.credentials);
    } else {
      const { clientId, clientSecret } = request.credentials;
      fields.push(json ? ['clientId', clientId] : ['client_id', clientId]);
      fields.push(json ? ['clientSecret', clientSecret] : ['client_secret', clientSecret]);
    }
    if (options.scopes.length > 0) {
      // The API's own JSON samples join with commas; RFC 6749 §3.3 joins with spaces.
      fields.push(
        json ? ['scopes', options.scopes.join(',')] : ['scope', options.scopes.join(' ')],
      );
    }
  } else {
    fields.push(json ? ['grantType', 'refreshToken'] : ['grant_type', 'refresh_token']);
    fields.push(
      json ? ['refreshToken', request.refreshToken] : ['refresh_token', request.refreshToken],
    );
  }

  if (json) {
    headers['content-type'] = JSON_CONTENT_TYPE;
    return { headers, body: JSON.stringify(Object.fromEntries(fields)) };
  }
  headers['content-type'] = FORM_CONTENT_TYPE;
  return { headers, body: new URLSearchParams(fields).toString() };
}

/**
 * `Basic base64(urlencode(id):urlencode(secret))`, as RFC 6749 §2.3.1 requires. The API's notes write
 * `base64(client_id:client_secret)`; the two are identical for ids and secrets made of letters,
 * digits and `-._*`, which is what the portal issues. Encoding first keeps a `:` in the id from
 * splitting the pair in the wrong place.
 */
export function basicAuthorization(credentials: ClientCredentials): string {
  const pair = `${formUrlEncode(credentials.clientId)}:${formUrlEncode(credentials.clientSecret)}`;
  return `Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
}

/** application/x-www-form-urlencoded serialisation of one value (WHATWG URL, as RFC 6749 App. B). */
export function formUrlEncode(value: string): string {
  return new URLSearchParams([['', value]]).toString().slice(1);
}
