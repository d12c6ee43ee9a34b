/**
 * The token endpoint client. Sending and checking are separate steps (docs/design.md "Practices"
 * 1): `sendGrantRequest` puts one grant on the wire and reads the answer (`wire.ts`),
 * `checkTokenResponse` turns whatever came back into a `TokenSet` or a `TokenEndpointError`. Error
 * messages name the problem and never carry a token, a secret or any of the answer body; the raw
 * body is kept on the error's non-enumerable `body`.
 */
import type { Dispatcher } from 'undici';
import { systemClock, type Clock } from '../clock.js';
import type { ClientAuth, TokenFormat } from '../config/types.js';
import { EgressProxyError, TokenEndpointError } from '../errors.js';
import { describeBody, describeCause, redact, safeUrl, typeName } from '../safe-text.js';
import { USER_AGENT } from '../version.js';
import { encodeGrantRequest } from './dialects.js';
import { isObject, redirectError, statusError } from './error-answer.js';
import { FieldError, parseTokenSet } from './token-body.js';
import type { GrantRequest, TokenEndpoint, TokenSet } from './types.js';
import { postOnce, type TokenAnswer } from './wire.js';

export type { TokenAnswer } from './wire.js';

/** Largest answer body read; more is a malformed answer. */
export const MAX_ANSWER_BYTES = 65536;

export interface TokenClientOptions {
  url: string;
  format: TokenFormat;
  clientAuth: ClientAuth;
  scopes: readonly string[];
  /** One request, connect to last byte of the answer. */
  timeoutMs: number;
  dispatcher: Dispatcher;
  /** Reads the time for HTTP-date `Retry-After` values. Default: the system clock. */
  clock?: Pick<Clock, 'now'>;
}

/**
 * Builds and sends one grant request and reads the answer, its body up to `MAX_ANSWER_BYTES`.
 * Redirects are never followed (the 3xx comes back as is). `signal` is the request's deadline
 * (made by `requestToken`, the one owner of it), connect to last byte. Rejects only with a
 * `TokenEndpointError` of kind `network` or `timeout`.
 */
export async function sendGrantRequest(
  options: TokenClientOptions,
  request: GrantRequest,
  signal: AbortSignal,
): Promise<TokenAnswer> {
  const { headers, body } = encodeGrantRequest(options, request);
  try {
    return await postOnce(options.dispatcher, {
      url: options.url,
      headers: { ...headers, 'user-agent': USER_AGENT },
      body,
      maxBytes: MAX_ANSWER_BYTES,
      signal,
    });
  } catch (error) {
    throw transportFailure(options, signal, error);
  }
}

/**
 * Validates one token endpoint answer. Any 2xx with a valid JSON token body becomes a `TokenSet`;
 * everything else rejects with a `TokenEndpointError`: 3xx `redirect`, 429 and 5xx `server` (with
 * `retryAfterMs`), other 4xx `rejected` (error-answer.ts), a bad body `malformed`.
 *
 * Decisions: the body is parsed as JSON whatever its content-type says; its fields are read as
 * token-body.ts says.
 */
export function checkTokenResponse(
  answer: TokenAnswer,
  clock: Pick<Clock, 'now'> = systemClock,
): TokenSet {
  const status = answer.status;
  if (status >= 300 && status < 400) throw redirectError(answer);
  if (status < 200 || status >= 300) throw statusError(answer, clock);
  const body = jsonObject(answer);
  try {
    return parseTokenSet(body);
  } catch (error) {
    if (error instanceof FieldError) throw malformed(error.message, status, answer.text);
    throw error;
  }
}

/** A 2xx answer's body as a JSON object, or a `malformed` error. */
function jsonObject(answer: TokenAnswer): Record<string, unknown> {
  const { status, text } = answer;
  if (answer.tooLarge) {
    throw new TokenEndpointError(
      'malformed',
      `token endpoint answer larger than ${MAX_ANSWER_BYTES} bytes`,
      { status },
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw malformed(
      `token endpoint answer is not JSON (${describeBody(answer.header('content-type'), text)})`,
      status,
      text,
    );
  }
  if (!isObject(parsed)) {
    throw malformed(
      `token endpoint answer must be a JSON object (got ${typeName(parsed)})`,
      status,
      text,
    );
  }
  return parsed;
}

/**
 * The token endpoint as the keeper sees it: send + check, bounded by `timeoutMs` from connect to
 * the last byte of the answer. This is the one place the deadline is made.
 */
export function createTokenEndpointClient(options: TokenClientOptions): TokenEndpoint {
  const clock = options.clock ?? systemClock;
  return {
    async requestToken(request: GrantRequest): Promise<TokenSet> {
      const deadline = AbortSignal.timeout(options.timeoutMs);
      try {
        return checkTokenResponse(await sendGrantRequest(options, request, deadline), clock);
      } catch (error) {
        throw transportFailure(options, deadline, error);
      }
    },
  };
}

function malformed(message: string, status: number, body: string): TokenEndpointError {
  return new TokenEndpointError('malformed', message, { status, body });
}

/**
 * The one classification of a failed request: an answer already judged (a status, a malformed
 * body) stays as it is; the request's own deadline is a `timeout` naming `timeoutMs`; any other
 * abort a `timeout` too; everything else a `network` failure, without the URL's secrets.
 */
function transportFailure(
  options: TokenClientOptions,
  signal: AbortSignal,
  error: unknown,
): TokenEndpointError {
  const settled =
    error instanceof TokenEndpointError && error.kind !== 'network' && error.kind !== 'timeout';
  if (settled) return error;
  const reason: unknown = signal.reason;
  if (signal.aborted && reason instanceof Error && reason.name === 'TimeoutError') {
    return new TokenEndpointError(
      'timeout',
      `token endpoint ${safeUrl(options.url)} timed out after ${options.timeoutMs} ms`,
      { cause: error },
    );
  }
  if (error instanceof TokenEndpointError) return error;
  if (error instanceof EgressProxyError) {
    return new TokenEndpointError(
      'network',
      `token endpoint ${safeUrl(options.url)} not reached: ${error.message}`,
      { cause: error },
    );
  }
  if (signal.aborted || isAbort(error)) {
    return new TokenEndpointError(
      'timeout',
      `token endpoint ${safeUrl(options.url)} request aborted`,
      { cause: error },
    );
  }
  return new TokenEndpointError(
    'network',
    `token endpoint ${safeUrl(options.url)} unreachable: ${redact(describeCause(error), options.url)}`,
    { cause: error },
  );
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
}
