/** The keeper's failure state: the backoff step, the time before which no request starts. */
import { errorText, TokenEndpointError } from '../errors.js';
import { errorKind, iso, type KeeperStatus } from './keeper-status.js';
import { RECOVERY_CAP_MS, retryTime } from './schedule.js';

/** The last failure's inputs to the retry time (schedule.ts `retryTime`). */
export interface FailureRecord {
  /** The backoff step: consecutive failures since the last success or credentials change. */
  failures: number;
  random: number;
  retryAfterMs: number | undefined;
}

export class Failures {
  /** What set `notBefore`, so it can be pulled in when the token is dropped; none after a success. */
  last: FailureRecord | undefined;
  consecutive = 0;
  /** Backoff / Retry-After: no token request before this time (ms since the epoch). */
  notBefore = 0;
  lastError: KeeperStatus['lastError'] = null;
  /** `consecutive` at the last credentials change: the backoff starts over from there. */
  #beforeChange = 0;

  /** `recoveryCapMs`: the longest wait while no valid token is held (`token.recoveryBackoffCapMs`). */
  constructor(
    private readonly random: () => number,
    private readonly recoveryCapMs = RECOVERY_CAP_MS,
  ) {}

  /** A failed request at `now`; `expiresAt`: the held token's, which caps the wait. */
  record(error: unknown, now: number, expiresAt: number | undefined): void {
    this.consecutive += 1;
    this.last = {
      failures: this.consecutive - this.#beforeChange,
      random: this.random(),
      retryAfterMs: error instanceof TokenEndpointError ? error.retryAfterMs : undefined,
    };
    this.notBefore = retryTime(now, this.last, expiresAt, this.recoveryCapMs);
    this.lastError = { kind: errorKind(error), message: errorText(error), at: iso(now) };
  }

  succeeded(): void {
    this.consecutive = 0;
    this.#beforeChange = 0;
    this.last = undefined;
    this.notBefore = 0;
  }

  /** A failure with the old credentials says nothing of new ones; false when none is pending. */
  credentialsChanged(): boolean {
    if (this.consecutive === 0) return false;
    this.#beforeChange = this.consecutive;
    this.last = undefined;
    this.notBefore = 0;
    return true;
  }

  /** The token was dropped: a pending backoff / Retry-After wait ends within the recovery cap. */
  tokenDropped(now: number): void {
    if (this.last === undefined) return;
    const recoveryAt = retryTime(now, this.last, undefined, this.recoveryCapMs);
    this.notBefore = Math.min(this.notBefore, recoveryAt);
  }
}
