/**
 * A token endpoint answer that is no token: a 3xx `redirect` (never followed), 429 and 5xx
 * `server` (with `retryAfterMs`), other 4xx `rejected`. The message names the status and the
 * OAuth error, never any of the body; the raw body is kept on the error's non-enumerable `body`.
 */
import { retryAfterMs as parseRetryAfter } from '../http-fields/retry-after.js';
import type { Clock } from '../clock.js';
import { TokenEndpointError } from '../errors.js';
import { clean, describeBody, safeLocation } from '../safe-text.js';
import type { TokenAnswer } from './wire.js';

/** The error for a 3xx answer. */
export function redirectError(answer: TokenAnswer): TokenEndpointError {
  const { status } = answer;
  const location = answer.header('location');
  return new TokenEndpointError(
    'redirect',
    `token endpoint answered ${status} redirect to ${location === null ? '(no Location)' : safeLocation(location)}; redirects are not followed`,
    { status },
  );
}

/** The error for a 1xx, 4xx or 5xx answer. */
export function statusError(answer: TokenAnswer, clock: Pick<Clock, 'now'>): TokenEndpointError {
  const { status } = answer;
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
  return new TokenEndpointError(
    server ? 'server' : 'rejected',
    statusMessage(answer, text, oauth, retryAfterMs),
    {
      status,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      ...(oauth === undefined ? {} : { oauthError: oauth.error }),
      ...(text === undefined ? {} : { body: text }),
    },
  );
}

function statusMessage(
  answer: TokenAnswer,
  text: string | undefined,
  oauth: OAuthError | undefined,
  retryAfterMs: number | undefined,
): string {
  let message = `token endpoint answered ${answer.status}`;
  if (oauth !== undefined) {
    message += ` ${oauth.error}`;
    if (oauth.description !== undefined) message += `: ${oauth.description}`;
  } else if (text !== undefined && text.length > 0) {
    message += ` (${describeBody(answer.header('content-type'), text)})`;
  }
  if (retryAfterMs !== undefined) message += ` (retry after ${Math.ceil(retryAfterMs / 1000)} s)`;
  return message;
}

interface OAuthError {
  error: string;
  description?: string;
}

/**
 * An OAuth error (`error`, `error_description`, RFC 6749 §5.2) or the API's
 * `{"errors":[{"code","detail"}]}`, cleaned for a log line.
 */
function parseOAuthError(text: string): OAuthError | undefined {
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

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
