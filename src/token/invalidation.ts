/**
 * Upstream 401s (docs/design.md "Token keeper"): at most one forced renewal per
 * {@link FORCED_RENEWAL_INTERVAL_MS}, and the rejected token remembered for the next grant's
 * compare-and-delete in a shared store.
 */
import type { Logger } from '../telemetry/logger.js';
import { iso } from './keeper-status.js';
import { FORCED_RENEWAL_INTERVAL_MS } from './schedule.js';

export class Invalidation {
  #lastForcedAt: number | undefined;
  /** The token an upstream 401 invalidated, until the next grant takes it. */
  #rejected: string | undefined;

  constructor(private readonly log: Logger) {}

  /** The rejected token the next grant deletes from the store, if still current there. */
  get rejected(): string | undefined {
    return this.#rejected;
  }

  /** A grant starts: it carries the rejected token, which is forgotten here. */
  take(): string | undefined {
    const token = this.#rejected;
    this.#rejected = undefined;
    return token;
  }

  /** A set from the store was adopted: no rejected token is pending any more. */
  clear(): void {
    this.#rejected = undefined;
  }

  /**
   * The upstream rejected the current `token` at `now`: true when a forced renewal may start (it
   * is recorded), false within the interval of the previous one (the newest token is kept).
   */
  force(token: string, now: number): boolean {
    const last = this.#lastForcedAt;
    if (last !== undefined && now - last < FORCED_RENEWAL_INTERVAL_MS) {
      this.log.warn(
        { event: 'token', reason: 'forced', rateLimited: true },
        'upstream rejected the newest access token again within 5 s of a forced renewal; keeping it',
      );
      return false;
    }
    this.#lastForcedAt = now;
    this.#rejected = token;
    return true;
  }

  /** The forced renewal's log line: `startAt` is when the next attempt may start. */
  logForced(now: number, startAt: number, inFlight: boolean): void {
    let what = 'a token request is already in flight';
    if (!inFlight) {
      what = startAt > now ? 'dropped it, the next attempt is after the backoff' : 'renewing';
    }
    this.log.info(
      { event: 'token', reason: 'forced', ...(startAt > now && { nextAttemptAt: iso(startAt) }) },
      `upstream rejected the access token; ${what}`,
    );
  }
}
