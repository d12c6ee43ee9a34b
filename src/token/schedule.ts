/**
 * The token renewal schedule and the retry backoff, as pure functions (docs/design.md "Token
 * keeper"). Everything time-related the keeper decides is computed here.
 */

/** Jitter subtracted from the renewal time: up to this fraction of the renewal lead. */
export const RENEWAL_JITTER_FRACTION = 0.1;
/** Backoff after a failed token request: full jitter over 1 s doubling up to 60 s. */
export const BACKOFF_BASE_MS = 1_000;
export const BACKOFF_CAP_MS = 60_000;
/**
 * While no valid token is held (the sidecar is not serving), no wait before the next attempt is
 * longer than the recovery cap, whatever the backoff step or `Retry-After` says: by default this,
 * full jitter over 1, 2, 4, 8 s. The default of `token.recoveryBackoffCapMs`.
 */
export const RECOVERY_CAP_MS = 8_000;
/** At most one forced renewal (upstream 401) per this interval. */
export const FORCED_RENEWAL_INTERVAL_MS = 5_000;
/**
 * Floor on the wait before a scheduled renewal, so an endpoint answering `expiresIn: 0` cannot
 * make the keeper spin.
 */
export const MIN_RENEWAL_DELAY_MS = 1_000;
/** Longest wait a token endpoint's `Retry-After` can impose (a year-long one would stall the keeper). */
export const MAX_RETRY_AFTER_MS = 3_600_000;
/** The rate ceiling: at most this many token requests in any {@link TOKEN_REQUEST_WINDOW_MS}. */
export const TOKEN_REQUEST_CEILING = 10;
export const TOKEN_REQUEST_WINDOW_MS = 10_000;

export interface RenewalSettings {
  refreshMarginSeconds: number;
  refreshFraction: number;
}

/**
 * How many seconds before expiry to renew: `max(margin, fraction × lifetime)` plus a jitter of up to
 * 10% of that (so replicas spread out), but never more than half the lifetime.
 */
export function renewalLeadSeconds(
  lifetimeSeconds: number,
  settings: RenewalSettings,
  random: number,
): number {
  const lead = Math.max(settings.refreshMarginSeconds, settings.refreshFraction * lifetimeSeconds);
  const jittered = lead * (1 + RENEWAL_JITTER_FRACTION * random);
  return Math.min(jittered, lifetimeSeconds / 2);
}

/** When to renew a token whose request was sent at `sentAt` (ms since the epoch). */
export function renewalTime(
  sentAt: number,
  lifetimeSeconds: number,
  settings: RenewalSettings,
  random: number,
): number {
  const expiresAt = sentAt + lifetimeSeconds * 1_000;
  return expiresAt - renewalLeadSeconds(lifetimeSeconds, settings, random) * 1_000;
}

/**
 * When the keeper renews a token it holds from now on: {@link renewalTime}, but never sooner than
 * {@link MIN_RENEWAL_DELAY_MS} from `now`.
 */
export function nextRenewalAt(
  now: number,
  token: { sentAt: number; lifetimeSeconds: number },
  settings: RenewalSettings,
  random: number,
): number {
  const at = renewalTime(token.sentAt, token.lifetimeSeconds, settings, random);
  return Math.max(at, now + MIN_RENEWAL_DELAY_MS);
}

/**
 * Delay before retrying after the `failures`-th consecutive failure (1 for the first): full jitter,
 * `random × min(cap, base × 2^(failures-1))`, and never less than the server's `Retry-After`
 * (itself capped). The caps: {@link BACKOFF_CAP_MS} and {@link MAX_RETRY_AFTER_MS} while a valid
 * token is held; `recoveryCapMs` for both when given (none is held: the sidecar is recovering).
 */
export function backoffDelayMs(
  failures: number,
  random: number,
  retryAfterMs: number | undefined,
  recoveryCapMs?: number,
): number {
  const exponent = Math.max(0, failures - 1);
  const cap = recoveryCapMs ?? BACKOFF_CAP_MS;
  // 2^6 already exceeds the cap; bounding the exponent keeps the arithmetic finite.
  const ceiling = Math.min(cap, BACKOFF_BASE_MS * 2 ** Math.min(exponent, 30));
  const retryAfterCap = recoveryCapMs ?? MAX_RETRY_AFTER_MS;
  return Math.max(random * ceiling, Math.min(retryAfterMs ?? 0, retryAfterCap));
}

/**
 * When to retry after a failure at `now`: after the backoff while the held token is still valid
 * (until `validUntil`; `undefined` or past when none is held), but never later than the recovery
 * delay after the moment it stops being valid. The recovery cap is at most {@link BACKOFF_CAP_MS}
 * (the configuration's range), so with the same `random` the recovery delay is never longer than
 * the backoff, and with no valid token the recovery delay alone decides.
 */
export function retryTime(
  now: number,
  failure: { failures: number; random: number; retryAfterMs: number | undefined },
  validUntil: number | undefined,
  recoveryCapMs = RECOVERY_CAP_MS,
): number {
  const { failures, random, retryAfterMs } = failure;
  const backoffAt = now + backoffDelayMs(failures, random, retryAfterMs);
  const lostAt = Math.max(now, validUntil ?? now);
  const recoveryDelay = backoffDelayMs(failures, random, retryAfterMs, recoveryCapMs);
  return Math.min(backoffAt, lostAt + recoveryDelay);
}

/**
 * The rate ceiling on token requests (docs/design.md "Token keeper": at most 10 in any 10 s,
 * whatever the endpoint answers). Every request is recorded; `nextFreeAt` says when the next one
 * may be sent.
 */
export class RequestCeiling {
  /** Send times of the most recent requests, oldest first; never more than `limit`. */
  private readonly sent: number[] = [];

  constructor(
    private readonly limit = TOKEN_REQUEST_CEILING,
    private readonly windowMs = TOKEN_REQUEST_WINDOW_MS,
  ) {}

  record(now: number): void {
    this.sent.push(now);
    if (this.sent.length > this.limit) this.sent.shift();
  }

  /** `now` when a request may be sent now, else when the oldest in the window leaves it. */
  nextFreeAt(now: number): number {
    if (this.sent.length < this.limit) return now;
    return Math.max(now, (this.sent[0] as number) + this.windowMs);
  }
}

/** Whole seconds until `at`, at least 1: the `Retry-After` a waiting caller is given. */
export function secondsUntil(at: number, now: number): number {
  return Math.max(1, Math.ceil((at - now) / 1_000));
}
