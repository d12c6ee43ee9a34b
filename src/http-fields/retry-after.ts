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
 * The wait is counted from when the answer was made (DESIGN "Quota guard"): an HTTP-date is
 * measured against the answer's own `Date` when it has a valid one (RFC 9110 §10.2.3), so a
 * sidecar clock behind the API's does not stretch it; then what the answer's age already used
 * is taken off: its `Age` (RFC 9111 §5.1, a cache's or a replayer's), or how long ago its `Date`
 * was, whichever is more. A replayed answer an hour old starts nothing. A time already past is 0.
 */
export function retryAfterMs(
  value: HeaderValue,
  nowMs: number,
  dateHeader?: HeaderValue,
  ageHeader?: HeaderValue,
): number | undefined {
  const text = single(value);
  if (text === undefined) return undefined;
  const date = single(dateHeader);
  const sentAt = date === undefined ? NaN : Date.parse(date);
  const delta = DELTA_SECONDS.exec(text);
  let total: number;
  if (delta) total = Number(delta[1]) * 1000;
  else {
    if (!LOOKS_LIKE_A_DATE.test(text)) return undefined;
    const at = Date.parse(text);
    if (!Number.isFinite(at)) return undefined;
    total = at - (Number.isFinite(sentAt) ? sentAt : nowMs);
  }
  const age = DELTA_SECONDS.exec(single(ageHeader) ?? '');
  const ageMs = age ? Number(age[1]) * 1000 : 0;
  const sinceDate = Number.isFinite(sentAt) ? nowMs - sentAt : 0;
  return Math.max(0, total - Math.max(ageMs, sinceDate, 0));
}

/** Whole seconds for a `Retry-After` the sidecar sends itself: rounded up, at least 1. */
export function wholeSecondsLeft(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
