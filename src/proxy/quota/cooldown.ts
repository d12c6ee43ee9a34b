/** The cooldown a 429/503 `Retry-After` starts: while in force the sidecar answers itself. */
import { SidecarError } from '../../errors.js';
import type { CooldownStatus } from '../../fleet/ports.js';
import { retryAfterMs, wholeSecondsLeft, type HeaderValue } from '../../http-fields/retry-after.js';
import type { Logger } from '../../telemetry/logger.js';

/** Only these answers are read for a cooldown (their `Retry-After`): 429 and 503. */
export function mayStartCooldown(status: number): status is CooldownStatus {
  return status === 429 || status === 503;
}

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

  /**
   * The pause a 429 or 503 asks for with its `Retry-After`, capped at `maxMs` and logged; undefined
   * when it asks for none: no or a bad `Retry-After`, or a time already past (docs/quota-guard.md).
   */
  askedFor(
    status: CooldownStatus,
    headers: Record<string, HeaderValue>,
    now: number,
    maxMs: number,
    logger: Logger,
  ): number | undefined {
    const ms = retryAfterMs(headers['retry-after'], now, headers.date, headers.age);
    if (ms === undefined || ms <= 0) return undefined;
    const capped = Math.min(ms, maxMs);
    logger.warn(
      {
        status,
        retryAfter: headers['retry-after'],
        cooldownSeconds: capped / 1000,
        capped: capped < ms,
      },
      'upstream asked to back off: cooling down',
    );
    return capped;
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
