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
 * `nowMs` is when the answer arrived (docs/quota-guard.md "When a wait counts from"):
 * delta-seconds count from then (RFC 9110 §10.2.3), less the answer's `Age` (RFC 9111 §5.1: a
 * cache held it that long). An HTTP-date is measured against the answer's own `Date` when it has a
 * valid one, so neither clock's skew stretches or shortens it, less `Age`; without a `Date`, against
 * the local clock. A `Date` alone never shortens a delta: it has one-second resolution and the
 * API's clock may be minutes off. A time already past is 0.
 */
export function retryAfterMs(
  value: HeaderValue,
  nowMs: number,
  dateHeader?: HeaderValue,
  ageHeader?: HeaderValue,
): number | undefined {
  const text = single(value);
  if (text === undefined) return undefined;
  const age = DELTA_SECONDS.exec(single(ageHeader) ?? '');
  const ageMs = age ? Number(age[1]) * 1000 : 0;
  const delta = DELTA_SECONDS.exec(text);
  if (delta) return Math.max(0, Number(delta[1]) * 1000 - ageMs);
  if (!LOOKS_LIKE_A_DATE.test(text)) return undefined;
  const at = Date.parse(text);
  if (!Number.isFinite(at)) return undefined;
  const date = single(dateHeader);
  const sentAt = date === undefined ? NaN : Date.parse(date);
  // Without a Date the local clock stands in for it, and then the answer's age is already in it.
  if (!Number.isFinite(sentAt)) return Math.max(0, at - nowMs);
  return Math.max(0, at - sentAt - ageMs);
}

/** Whole seconds for a `Retry-After` the sidecar sends itself: rounded up, at least 1. */
export function wholeSecondsLeft(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
