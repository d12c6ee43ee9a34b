/**
 * `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date. Pure, so every form is tested
 * without a socket.
 */

/** One header value, as node and undici hand it over (repeated fields arrive as an array). */
export type HeaderValue = string | string[] | undefined;

const DELTA_SECONDS = /^\s*(\d{1,15})\s*$/;
/** An HTTP-date names its month or weekday (IMF-fixdate, RFC 850, asctime); V8's lenient parser would take "1.5". */
const LOOKS_LIKE_A_DATE = /[A-Za-z]{3}/;

function single(value: HeaderValue): string | undefined {
  // A repeated Retry-After is invalid (it is a singleton field); the first one is as good a guess.
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Milliseconds from now that `Retry-After` names, or undefined when it is absent or invalid.
 * An HTTP-date is measured against the answer's own `Date` when it has a valid one, so a skewed
 * sidecar clock does not stretch or shrink the wait (RFC 9110 §10.2.3 relates it to `Date`);
 * otherwise against `nowMs`. A time already past is 0.
 */
export function retryAfterMs(
  value: HeaderValue,
  nowMs: number,
  dateHeader?: HeaderValue,
): number | undefined {
  const text = single(value);
  if (text === undefined) return undefined;
  const delta = DELTA_SECONDS.exec(text);
  if (delta) return Number(delta[1]) * 1000;
  if (!LOOKS_LIKE_A_DATE.test(text)) return undefined;
  const at = Date.parse(text);
  if (!Number.isFinite(at)) return undefined;
  const date = single(dateHeader);
  const sentAt = date === undefined ? NaN : Date.parse(date);
  const base = Number.isFinite(sentAt) ? sentAt : nowMs;
  return Math.max(0, at - base);
}

/** Whole seconds for a `Retry-After` the sidecar sends itself: rounded up, at least 1. */
export function wholeSecondsLeft(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
