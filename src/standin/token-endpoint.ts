/**
 * POST /oauth/token/ as docs/api-notes.md §4.1 describes it: the request read in either format
 * (token-wire.ts), single-use refresh tokens, and injectable faults (token-faults.ts).
 */
import { envelope, readSmallBody, sendJson, type Req, type Res } from './http.js';
import { takeFault, type StandinState } from './state.js';
import { applyFault } from './token-faults.js';
import {
  NAMES,
  NO_STORE,
  credentialsOk,
  normaliseGrant,
  oauthError,
  parseBody,
  recognisedGrant,
  tokenBody,
  type ParsedRequest,
} from './token-wire.js';
import type { RecordedTokenRequest } from './types.js';

const MAX_TOKEN_BODY = 64 * 1024;

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
