/**
 * The token endpoint client. Sending and checking are separate steps (docs/design.md "Practices"
 * 1): `sendGrantRequest` puts one grant on the wire and reads the answer (`wire.ts`),
 * `checkTokenResponse` turns whatever came back into a `TokenSet` or a `TokenEndpointError`. Error
 * messages name the problem and never carry a token, a secret or any of the answer body; the raw
 * body is kept on the error's non-enumerable `body`.
 */
import { retryAfterMs as parseRetryAfter } from '../http-fields/retry-after.js';
import type { Dispatcher } from 'undici';
import { systemClock, type Clock } from '../clock.js';
import type { ClientAuth, TokenFormat } from '../config/types.js';
import { TokenEndpointError } from '../errors.js';
import {
  clean,
  describeBody,
  describeCause,
  redact,
  safeLocation,
  safeUrl,
  showValue,
  typeName,
} from '../safe-text.js';
import { encodeGrantRequest } from './dialects.js';
import type { GrantRequest, TokenEndpoint, TokenSet } from './types.js';
import { postOnce, type TokenAnswer } from './wire.js';

export type { TokenAnswer } from './wire.js';

/** Lifetime assumed when an answer has no `expiresIn` (docs/design.md "Token keeper"). */
export const DEFAULT_LIFETIME_SECONDS = 300;
/** Largest answer body read; more is a malformed answer. */
export const MAX_ANSWER_BYTES = 65536;
/** Largest `expiresIn` accepted (2^31−1 s, about 68 years); larger is a malformed answer. */
export const MAX_EXPIRES_IN_SECONDS = 2 ** 31 - 1;
/** Longest access token accepted (8 KiB): it must fit in a request header. */
export const MAX_ACCESS_TOKEN_CHARS = 8192;
/** RFC 6750 §2.1 `b64token`: the only characters a Bearer credential may carry. */
const B64TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;

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
      headers,
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
 * `retryAfterMs`), other 4xx `rejected`, a bad body `malformed`.
 *
 * Decisions: the body is parsed as JSON whatever its content-type says; field names are accepted in
 * either casing (camelCase first); `expiresIn` may be a number or a string of decimal digits
 * ("1799"), anything else but absence is malformed (absent: `DEFAULT_LIFETIME_SECONDS`).
 */
export function checkTokenResponse(
  answer: TokenAnswer,
  clock: Pick<Clock, 'now'> = systemClock,
): TokenSet {
  const status = answer.status;

  if (status >= 300 && status < 400) {
    const location = answer.header('location');
    throw new TokenEndpointError(
      'redirect',
      `token endpoint answered ${status} redirect to ${location === null ? '(no Location)' : safeLocation(location)}; redirects are not followed`,
      { status },
    );
  }

  if (status < 200 || status >= 300) {
    // One parser for the whole sidecar: counted from when the answer was made (its Date, its Age).
    const retryAfterMs = parseRetryAfter(
      answer.header('retry-after') ?? undefined,
      clock.now(),
      answer.header('date') ?? undefined,
      answer.header('age') ?? undefined,
    );
    const server = status === 429 || status < 400 || status >= 500;
    // The status already says what happened; a body over the cap adds nothing.
    const text = answer.tooLarge ? undefined : answer.text;
    const oauth = text === undefined ? undefined : parseOAuthError(text);
    let message = `token endpoint answered ${status}`;
    if (oauth !== undefined) {
      message += ` ${oauth.error}`;
      if (oauth.description !== undefined) message += `: ${oauth.description}`;
    } else if (text !== undefined && text.length > 0) {
      message += ` (${describeBody(answer.header('content-type'), text)})`;
    }
    if (retryAfterMs !== undefined) message += ` (retry after ${Math.ceil(retryAfterMs / 1000)} s)`;
    throw new TokenEndpointError(server ? 'server' : 'rejected', message, {
      status,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      ...(oauth === undefined ? {} : { oauthError: oauth.error }),
      ...(text === undefined ? {} : { body: text }),
    });
  }

  if (answer.tooLarge) {
    throw new TokenEndpointError(
      'malformed',
      `token endpoint answer larger than ${MAX_ANSWER_BYTES} bytes`,
      { status },
    );
  }
  const text = answer.text;
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
  try {
    return parseTokenSet(parsed);
  } catch (error) {
    if (error instanceof FieldError) throw malformed(error.message, status, text);
    throw error;
  }
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

/** Thrown by the field validators; turned into a `malformed` TokenEndpointError by the caller. */
class FieldError extends Error {}

function parseTokenSet(body: Record<string, unknown>): TokenSet {
  const accessToken = field(body, 'accessToken', 'access_token');
  if (typeof accessToken.value !== 'string' || accessToken.value.length === 0) {
    throw new FieldError(
      accessToken.value === undefined
        ? `token endpoint answer: ${accessToken.label} is missing`
        : `token endpoint answer: ${accessToken.label} must be a non-empty string (got ${typeName(accessToken.value)})`,
    );
  }
  // A token undici cannot put in a header (CR/LF, space, non-ASCII) would fail every request for
  // its whole lifetime. The message never shows the value: it may be a working credential.
  if (accessToken.value.length > MAX_ACCESS_TOKEN_CHARS || !B64TOKEN.test(accessToken.value)) {
    throw new FieldError(
      `token endpoint answer: ${accessToken.label} must be an RFC 6750 b64token ([A-Za-z0-9._~+/-]+ then optional =) of at most ${MAX_ACCESS_TOKEN_CHARS} characters (got ${accessToken.value.length} characters${B64TOKEN.test(accessToken.value) ? '' : ', some outside that set'})`,
    );
  }

  const tokenType = field(body, 'tokenType', 'token_type');
  if (tokenType.value === undefined) {
    throw new FieldError(`token endpoint answer: ${tokenType.label} is missing`);
  }
  if (typeof tokenType.value !== 'string' || tokenType.value.toLowerCase() !== 'bearer') {
    throw new FieldError(
      `token endpoint answer: ${tokenType.label} must be "Bearer" (got ${showValue(tokenType.value)})`,
    );
  }

  const expiresIn = field(body, 'expiresIn', 'expires_in');
  let expiresInSeconds = DEFAULT_LIFETIME_SECONDS;
  const lifetimeDefaulted = expiresIn.value === undefined;
  if (!lifetimeDefaulted) {
    const seconds = toNonNegativeInteger(expiresIn.value);
    if (seconds === undefined) {
      throw new FieldError(
        `token endpoint answer: ${expiresIn.label} must be a non-negative integer (got ${showValue(expiresIn.value)})`,
      );
    }
    if (seconds > MAX_EXPIRES_IN_SECONDS) {
      throw new FieldError(
        `token endpoint answer: ${expiresIn.label} must be at most ${MAX_EXPIRES_IN_SECONDS} seconds (got ${showValue(expiresIn.value)})`,
      );
    }
    expiresInSeconds = seconds;
  }

  const refresh = field(body, 'refreshToken', 'refresh_token');
  if (
    refresh.value !== undefined &&
    refresh.value !== null &&
    (typeof refresh.value !== 'string' || refresh.value.length === 0)
  ) {
    throw new FieldError(
      `token endpoint answer: ${refresh.label} must be a non-empty string or null (got ${typeName(refresh.value)})`,
    );
  }

  return {
    accessToken: accessToken.value,
    tokenType: 'bearer',
    expiresInSeconds,
    lifetimeDefaulted,
    refreshToken: refresh.value,
  };
}

/** One field in either casing, with the name to print: the one present, else both. */
function field(
  body: Record<string, unknown>,
  camel: string,
  snake: string,
): { value: unknown; label: string } {
  if (Object.hasOwn(body, camel)) return { value: body[camel], label: `"${camel}"` };
  if (Object.hasOwn(body, snake)) return { value: body[snake], label: `"${snake}"` };
  return { value: undefined, label: `"${camel}" (or "${snake}")` };
}

function toNonNegativeInteger(value: unknown): number | undefined {
  if (typeof value === 'number') {
    return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  }
  if (typeof value === 'string' && /^\d{1,15}$/.test(value)) return Number(value);
  return undefined;
}

/**
 * An OAuth error (`error`, `error_description`, RFC 6749 §5.2) or the API's
 * `{"errors":[{"code","detail"}]}`, cleaned for a log line.
 */
function parseOAuthError(text: string): { error: string; description?: string } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(parsed)) return undefined;
  let code: unknown = parsed.error;
  let description: unknown = parsed.error_description ?? parsed.errorDescription;
  if (typeof code !== 'string' && Array.isArray(parsed.errors)) {
    const first: unknown = parsed.errors[0];
    if (isObject(first)) {
      code = first.code;
      description = first.detail;
    }
  }
  if (typeof code !== 'string' || clean(code).length === 0) return undefined;
  const error = clean(code);
  return typeof description === 'string' && clean(description).length > 0
    ? { error, description: clean(description) }
    : { error };
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

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
