/**
 * The stand-in token endpoint's wire format (docs/api-notes.md §4.1): format A (JSON, camelCase)
 * and format B (form, snake_case) chosen by Content-Type, client credentials in the body or a
 * Basic header, and the answer bodies in the request's casing.
 */
import { timingSafeEqual } from 'node:crypto';
import type { Req } from './http.js';
import type { StandinState } from './state.js';
import type { IssuedSet } from './tokens.js';

/** RFC 6749 §5.1: token answers must not be cached. */
export const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

export type Format = 'json' | 'form';

export interface ParsedRequest {
  format: Format;
  /** As on the wire. */
  grantType: string | undefined;
  clientId: string | undefined;
  clientSecret: string | undefined;
  auth: 'body' | 'basic' | 'none';
  refreshToken: string | undefined;
  scopes: string | undefined;
}

/** Wire names per format (docs/api-notes.md §4.1). */
export const NAMES = {
  json: {
    grantType: 'grantType',
    clientId: 'clientId',
    clientSecret: 'clientSecret',
    refreshToken: 'refreshToken',
    scopes: 'scopes',
    clientCredentials: 'clientCredentials',
    refreshGrant: 'refreshToken',
  },
  form: {
    grantType: 'grant_type',
    clientId: 'client_id',
    clientSecret: 'client_secret',
    refreshToken: 'refresh_token',
    scopes: 'scope',
    clientCredentials: 'client_credentials',
    refreshGrant: 'refresh_token',
  },
} as const;

function mediaType(req: Req): string {
  const header = req.headers['content-type'];
  return (header ?? '').split(';')[0]!.trim().toLowerCase();
}

function parseBasic(header: string | undefined): { id: string; secret: string } | undefined {
  const match = /^basic\s+(\S+)\s*$/i.exec(header ?? '');
  if (match === null) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  return { id: decoded.slice(0, colon), secret: decoded.slice(colon + 1) };
}

/** RFC 6749 §2.3.1 form-encodes id and secret before base64; accept that as well as the raw pair. */
function formDecode(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return value;
  }
}

export function parseBody(req: Req, body: Buffer): ParsedRequest | string {
  const type = mediaType(req);
  let format: Format;
  let get: (name: string) => string | undefined;
  if (type === 'application/json') {
    format = 'json';
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return 'the body is not valid JSON';
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      return 'the JSON body must be an object';
    }
    const record = parsed as Record<string, unknown>;
    get = (name) => {
      const value = record[name];
      return typeof value === 'string' ? value : undefined;
    };
  } else if (type === 'application/x-www-form-urlencoded') {
    format = 'form';
    const params = new URLSearchParams(body.toString('utf8'));
    get = (name) => params.get(name) ?? undefined;
  } else {
    return `unsupported Content-Type "${type}": use application/json or application/x-www-form-urlencoded`;
  }
  const names = NAMES[format];
  const basic = parseBasic(req.headers.authorization);
  const bodyId = get(names.clientId);
  const bodySecret = get(names.clientSecret);
  return {
    format,
    grantType: get(names.grantType),
    clientId: basic?.id ?? bodyId,
    clientSecret: basic?.secret ?? bodySecret,
    auth: basic !== undefined ? 'basic' : bodyId !== undefined ? 'body' : 'none',
    refreshToken: get(names.refreshToken),
    scopes: get(names.scopes),
  };
}

function sameSecret(presented: string, expected: string): boolean {
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

export function credentialsOk(state: StandinState, parsed: ParsedRequest): boolean {
  const { clientId, clientSecret } = parsed;
  if (clientId === undefined || clientSecret === undefined) return false;
  if (clientId === state.clientId && sameSecret(clientSecret, state.clientSecret)) return true;
  return (
    parsed.auth === 'basic' &&
    formDecode(clientId) === state.clientId &&
    sameSecret(formDecode(clientSecret), state.clientSecret)
  );
}

/** The grant, when the value is the one this format spells (JSON `clientCredentials`, form `client_credentials`). */
export function recognisedGrant(
  parsed: ParsedRequest,
): 'client_credentials' | 'refresh_token' | undefined {
  const names = NAMES[parsed.format];
  if (parsed.grantType === names.clientCredentials) return 'client_credentials';
  if (parsed.grantType === names.refreshGrant) return 'refresh_token';
  return undefined;
}

export function normaliseGrant(parsed: ParsedRequest): string {
  return recognisedGrant(parsed) ?? parsed.grantType ?? '';
}

/** The success body in the request's casing; `refreshToken` null or left out per the test knobs. */
export function tokenBody(
  format: Format | 'other',
  set: IssuedSet,
  refresh: 'new' | 'null' | 'omit',
): Record<string, unknown> {
  const snake = format === 'form';
  const body: Record<string, unknown> = {
    [snake ? 'access_token' : 'accessToken']: set.accessToken,
  };
  if (refresh !== 'omit') {
    body[snake ? 'refresh_token' : 'refreshToken'] = refresh === 'null' ? null : set.refreshToken;
  }
  body[snake ? 'token_type' : 'tokenType'] = 'Bearer';
  body[snake ? 'expires_in' : 'expiresIn'] = set.expiresIn;
  return body;
}

export function oauthError(error: string, description: string): Record<string, string> {
  return { error, error_description: description };
}
