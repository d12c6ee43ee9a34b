/** The cooldown a 429/503 `Retry-After` starts: while in force the sidecar answers itself. */
import { SidecarError } from '../../errors.js';
import type { CooldownStatus } from '../../fleet/ports.js';
import { wholeSecondsLeft } from '../../http-fields/retry-after.js';

export class Cooldown {
  /** 0 when none; else the local time the cooldown ends. */
  until = 0;
  status: CooldownStatus = 429;

  /** Throws the refusal while a cooldown is in force at `now`. */
  check(now: number): void {
    const left = this.until - now;
    if (left <= 0) {
      this.until = 0;
      return;
    }
    throw this.refusal(left);
  }

  refusal(leftMs: number): SidecarError {
    const seconds = wholeSecondsLeft(leftMs);
    return this.status === 429
      ? new SidecarError(
          'upstream_rate_limited',
          `the API asked for a pause (429); not sent, retry in ${seconds} s`,
          { retryAfterSeconds: seconds },
        )
      : new SidecarError(
          'upstream_unavailable',
          `the API is unavailable (503); not sent, retry in ${seconds} s`,
          { retryAfterSeconds: seconds },
        );
  }

  /** Extend (never shorten) to `ms` from `now`; true when it did. */
  extend(status: CooldownStatus, ms: number, now: number): boolean {
    const until = now + ms;
    if (until <= this.until) return false;
    this.until = until;
    this.status = status;
    return true;
  }

  /** For `/status`: null when none is in force. */
  view(now: number): { status: CooldownStatus; secondsLeft: number; until: string } | null {
    const left = this.until - now;
    if (left <= 0) return null;
    const until = new Date(this.until).toISOString();
    return { status: this.status, secondsLeft: wholeSecondsLeft(left), until };
  }
}
