/**
 * The stand-in token endpoint's injectable faults (types.ts `TokenFault`): resets, hangs, error
 * statuses, HTML pages, redirects, oversized and malformed token answers.
 */
import { envelope, out, resetRequest, sendJson, streamBytes, type Req, type Res } from './http.js';
import type { StandinState } from './state.js';
import { NO_STORE, tokenBody, type Format } from './token-wire.js';
import type { RecordedTokenRequest, TokenFault } from './types.js';

/**
 * A fault answers instead of the grant and changes no state: a presented refresh token stays
 * usable. The malformed-answer faults do register the tokens they carry, so a client that accepts
 * (say) a missing `expiresIn` can still use them.
 */
export function applyFault(
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
  switch (fault.kind) {
    case 'reset':
      finish(undefined);
      resetRequest(req);
      return;
    case 'hang':
      finish(undefined);
      return;
    case 'status':
      finish(fault.status);
      statusAnswer(res, state, fault);
      return;
    case 'html':
      finish(200);
      htmlAnswer(res);
      return;
    case 'redirect':
      finish(302);
      sendJson(res, 302, undefined, { location: fault.location });
      return;
    case 'huge':
      finish(state.tokenStatus);
      hugeAnswer(res, state.tokenStatus, fault.bytes, format === 'form');
      return;
    default:
      finish(state.tokenStatus);
      sendJson(res, state.tokenStatus, malformedBody(state, format, fault), NO_STORE);
  }
}

/** An error status with the fault's body, content type and date fields. */
function statusAnswer(
  res: Res,
  state: StandinState,
  fault: Extract<TokenFault, { kind: 'status' }>,
): void {
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
}

/** A gateway's maintenance page with status 200, as a misrouted token request can get. */
function htmlAnswer(res: Res): void {
  const page =
    '<!DOCTYPE html>\n<html><head><title>Service Unavailable</title></head>' +
    '<body><h1>Service Unavailable</h1><p>The gateway is down for maintenance.</p></body></html>\n';
  out(res).writeHead(200, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(page),
  });
  out(res).end(page);
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
