/**
 * A token bucket of `count` slots refilled evenly over `periodMs` (docs/quota-guard.md):
 * one slot every `periodMs / count`, never more than `count` banked. Pure: the caller passes the
 * time, so the arithmetic is tested without timers.
 */
export interface RateLimit {
  count: number;
  periodMs: number;
}

export class TokenBucket {
  /** Milliseconds between two slots. */
  readonly intervalMs: number;
  private tokens: number;
  private last: number;

  constructor(
    readonly limit: RateLimit,
    nowMs: number,
  ) {
    this.intervalMs = limit.periodMs / limit.count;
    this.tokens = limit.count;
    this.last = nowMs;
  }

  private refill(nowMs: number): void {
    if (nowMs <= this.last) return;
    this.tokens = Math.min(this.limit.count, this.tokens + (nowMs - this.last) / this.intervalMs);
    this.last = nowMs;
  }

  /** Set the content as another bucket reported it (the store's, mirrored for estimates). */
  set(tokens: number, nowMs: number): void {
    this.tokens = Math.max(0, Math.min(this.limit.count, tokens));
    this.last = nowMs;
  }

  /** Slots that could be taken now (fractional: a slot partly refilled). */
  available(nowMs: number): number {
    this.refill(nowMs);
    return this.tokens;
  }

  /** Take up to `want` whole slots; returns how many were taken. */
  take(want: number, nowMs: number): number {
    this.refill(nowMs);
    // A hair of tolerance: float sums of intervals must not make a due slot wait another 1 ms.
    const whole = Math.min(want, Math.floor(this.tokens + 1e-9));
    if (whole <= 0) return 0;
    this.tokens = Math.max(0, this.tokens - whole);
    return whole;
  }

  /** Milliseconds until `k` slots (k >= 1) are available, assuming nobody else takes one. */
  msUntil(k: number, nowMs: number): number {
    this.refill(nowMs);
    const missing = k - this.tokens;
    return missing <= 1e-9 ? 0 : Math.ceil(missing * this.intervalMs);
  }
}
