/**
 * POST /oauth/token/ as docs/api-notes.md §4.1 describes it: format A (JSON, camelCase) and
 * format B (form, snake_case) chosen by Content-Type, the answer in the request's casing, client
 * credentials in the body or a Basic header, single-use refresh tokens, and injectable faults.
 */
import { timingSafeEqual } from 'node:crypto';
import {
  envelope,
  out,
  readSmallBody,
  resetRequest,
  sendJson,
  streamBytes,
  type Req,
  type Res,
} from './http.js';
import { takeFault, type StandinState } from './state.js';
import type { IssuedSet } from './tokens.js';
import type { RecordedTokenRequest, TokenFault } from './types.js';

const MAX_TOKEN_BODY = 64 * 1024;
/** RFC 6749 §5.1: token answers must not be cached. */
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

type Format = 'json' | 'form';

interface ParsedRequest {
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
const NAMES = {
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

function parseBody(req: Req, body: Buffer): ParsedRequest | string {
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

function credentialsOk(state: StandinState, parsed: ParsedRequest): boolean {
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
function recognisedGrant(
  parsed: ParsedRequest,
): 'client_credentials' | 'refresh_token' | undefined {
  const names = NAMES[parsed.format];
  if (parsed.grantType === names.clientCredentials) return 'client_credentials';
  if (parsed.grantType === names.refreshGrant) return 'refresh_token';
  return undefined;
}

function normaliseGrant(parsed: ParsedRequest): string {
  return recognisedGrant(parsed) ?? parsed.grantType ?? '';
}

/** The success body in the request's casing; `refreshToken` null or left out per the test knobs. */
function tokenBody(
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

function oauthError(error: string, description: string): Record<string, string> {
  return { error, error_description: description };
}

export async function handleTokenRequest(req: Req, res: Res, state: StandinState): Promise<void> {
  const read = await readSmallBody(req, MAX_TOKEN_BODY);
  if (read === undefined) return;
  const parsed = read.tooLarge
    ? `the body is larger than ${MAX_TOKEN_BODY} bytes`
    : parseBody(req, read.body);
  const record: RecordedTokenRequest = {
    at: state.clock.now(),
    format: typeof parsed === 'string' ? 'other' : parsed.format,
    grant: typeof parsed === 'string' ? '' : normaliseGrant(parsed),
    auth: typeof parsed === 'string' ? 'none' : parsed.auth,
    clientId: typeof parsed === 'string' ? undefined : parsed.clientId,
    secretOk: typeof parsed === 'string' ? false : credentialsOk(state, parsed),
    scopes: typeof parsed === 'string' ? undefined : parsed.scopes,
    refreshToken: typeof parsed === 'string' ? undefined : parsed.refreshToken,
    outcome: 'fault',
    status: undefined,
  };
  const answer = (status: number, body: unknown, headers: Record<string, string> = {}): void => {
    record.status = status;
    state.tokenRequests.push(record);
    state.logger?.debug(
      { grant: record.grant, format: record.format, outcome: record.outcome, status },
      'stand-in token request',
    );
    sendJson(res, status, body, { ...NO_STORE, ...headers });
  };

  if (req.method !== 'POST') {
    record.outcome = 'rejected';
    answer(405, envelope('method_not_allowed', 'use POST'), { allow: 'POST' });
    return;
  }
  const fault = takeFault(state);
  if (fault !== undefined && fault.kind !== 'delay') {
    applyFault(
      req,
      res,
      state,
      record,
      typeof parsed === 'string' ? 'other' : parsed.format,
      fault,
    );
    return;
  }
  const grant = (): void => {
    if (typeof parsed === 'string') {
      record.outcome = 'rejected';
      answer(400, envelope('invalid_request', parsed));
      return;
    }
    processGrant(state, parsed, record, answer);
  };
  if (fault?.kind === 'delay') state.timers.after(fault.ms, res, grant);
  else grant();
}

function processGrant(
  state: StandinState,
  parsed: ParsedRequest,
  record: RecordedTokenRequest,
  answer: (status: number, body: unknown, headers?: Record<string, string>) => void,
): void {
  const names = NAMES[parsed.format];
  record.outcome = 'rejected';
  if (parsed.grantType === undefined) {
    answer(400, oauthError('invalid_request', `"${names.grantType}" is required`));
    return;
  }
  const grant = recognisedGrant(parsed);
  if (grant === 'client_credentials') {
    if (!record.secretOk) {
      const challenge: Record<string, string> =
        parsed.auth === 'basic' ? { 'www-authenticate': 'Basic realm="oauth"' } : {};
      const why =
        parsed.auth === 'none'
          ? 'client authentication is required'
          : 'unknown client or wrong client secret';
      answer(401, oauthError('invalid_client', why), challenge);
      return;
    }
  } else if (grant === 'refresh_token') {
    // Spec 4.1 rule 3: a refresh exchange needs no client credentials, so none are checked.
    if (parsed.refreshToken === undefined) {
      answer(400, oauthError('invalid_request', `"${names.refreshToken}" is required`));
      return;
    }
    if (!state.tokens.useRefreshToken(parsed.refreshToken)) {
      answer(400, oauthError('invalid_grant', 'the refresh token is unknown, used or revoked'));
      return;
    }
  } else {
    answer(
      400,
      oauthError(
        'unsupported_grant_type',
        `"${names.grantType}" must be ${names.clientCredentials} or ${names.refreshGrant}`,
      ),
    );
    return;
  }
  let refresh: 'new' | 'null' | 'omit' = 'new';
  if (state.nullRefreshTokenNext > 0) {
    state.nullRefreshTokenNext -= 1;
    refresh = 'null';
  } else if (state.omitRefreshTokenNext > 0) {
    state.omitRefreshTokenNext -= 1;
    refresh = 'omit';
  }
  const set = state.tokens.issue(refresh === 'new');
  record.outcome = 'issued';
  answer(state.tokenStatus, tokenBody(parsed.format, set, refresh));
}

/**
 * A fault answers instead of the grant and changes no state: a presented refresh token stays
 * usable. The malformed-answer faults do register the tokens they carry, so a client that accepts
 * (say) a missing `expiresIn` can still use them.
 */
function applyFault(
  req: Req,
  res: Res,
  state: StandinState,
  record: RecordedTokenRequest,
  format: Format | 'other',
  fault: Exclude<TokenFault, { kind: 'delay' }>,
): void {
  record.outcome = 'fault';
  const finish = (status: number | undefined): void => {
    record.status = status;
    state.tokenRequests.push(record);
  };
  const snake = format === 'form';
  switch (fault.kind) {
    case 'reset':
      finish(undefined);
      resetRequest(req);
      return;
    case 'hang':
      finish(undefined);
      return;
    case 'status': {
      finish(fault.status);
      const body =
        fault.body ?? JSON.stringify(envelope('injected_fault', `stand-in fault ${fault.status}`));
      const headers: Record<string, string | number> = {
        ...NO_STORE,
        'content-type': fault.contentType ?? 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
      };
      if (fault.retryAfter !== undefined) headers['retry-after'] = fault.retryAfter;
      if (fault.age !== undefined) headers.age = fault.age;
      if (fault.dateOffsetMs === null) res.sendDate = false;
      else if (fault.dateOffsetMs !== undefined) {
        headers.date = new Date(state.clock.now() + fault.dateOffsetMs).toUTCString();
      }
      out(res).writeHead(fault.status, headers);
      out(res).end(body);
      return;
    }
    case 'html': {
      finish(200);
      const page =
        '<!DOCTYPE html>\n<html><head><title>Service Unavailable</title></head>' +
        '<body><h1>Service Unavailable</h1><p>The gateway is down for maintenance.</p></body></html>\n';
      out(res).writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'content-length': Buffer.byteLength(page),
      });
      out(res).end(page);
      return;
    }
    case 'redirect':
      finish(302);
      sendJson(res, 302, undefined, { location: fault.location });
      return;
    case 'huge':
      finish(state.tokenStatus);
      hugeAnswer(res, state.tokenStatus, fault.bytes, snake);
      return;
    default:
      finish(state.tokenStatus);
      sendJson(res, state.tokenStatus, malformedBody(state, format, fault), NO_STORE);
  }
}

/** A token answer of `bytes` bytes: its access token is the padding. */
function hugeAnswer(res: Res, status: number, bytes: number, snake: boolean): void {
  const head = Buffer.from(`{"${snake ? 'access_token' : 'accessToken'}":"`);
  const tail = Buffer.from('"}');
  const total = Math.max(0, bytes);
  const padding = Math.max(0, total - head.length - tail.length);
  out(res).writeHead(status, {
    ...NO_STORE,
    'content-type': 'application/json',
    'content-length': total,
  });
  if (padding === 0) {
    out(res).end(Buffer.concat([head, tail]).subarray(0, total));
    return;
  }
  out(res).write(head);
  streamBytes(res, padding, Buffer.alloc(64 * 1024, 'a'), tail);
}

/** A token answer with one field missing or wrong; the tokens it carries are registered. */
function malformedBody(
  state: StandinState,
  format: Format | 'other',
  fault: Extract<
    TokenFault,
    { kind: 'missing-access-token' | 'access-token' | 'token-type' | 'expires-in' }
  >,
): Record<string, unknown> {
  const snake = format === 'form';
  const body = tokenBody(format, state.tokens.issue(true), 'new');
  if (fault.kind === 'missing-access-token') {
    delete body[snake ? 'access_token' : 'accessToken'];
  } else if (fault.kind === 'access-token') {
    body[snake ? 'access_token' : 'accessToken'] = fault.value;
  } else if (fault.kind === 'token-type') {
    body[snake ? 'token_type' : 'tokenType'] = fault.tokenType;
  } else if (fault.omit === true) {
    delete body[snake ? 'expires_in' : 'expiresIn'];
  } else {
    body[snake ? 'expires_in' : 'expiresIn'] = fault.value;
  }
  return body;
}
