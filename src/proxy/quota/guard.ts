/**
 * The quota guard (docs/quota-guard.md): spends the API's per-organisation quota on behalf of
 * every caller. Two parts:
 * - a cooldown taken from a 429/503 `Retry-After`, during which the sidecar answers itself;
 * - an optional rate limit: a token bucket with a bounded FIFO wait queue.
 * With a shared store (SharedQuota) both are fleet-wide; when the store fails each process applies
 * them alone. With no limit and no cooldown, `admit` is two comparisons: no allocation, no promise.
 */
import type { Clock, TimerHandle } from '../../clock.js';
import { SidecarError } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';
import { TokenBucket, type RateLimit } from './bucket.js';
import { retryAfterMs, wholeSecondsLeft, type HeaderValue } from './retry-after.js';

export type { RateLimit } from './bucket.js';

/** The statuses that start a cooldown (with `Retry-After`). */
export type CooldownStatus = 429 | 503;

/** A fleet cooldown as the store reports it: time left is measured on the store's clock. */
export interface SharedCooldown {
  status: CooldownStatus;
  msLeft: number;
}

/** One fleet-wide rate-limit decision (one atomic script in the store). */
export interface SharedDecision {
  /** Slots granted, 0..want. None while a cooldown is in force. */
  granted: number;
  /** Milliseconds until the fleet bucket has its next slot (0 when slots are left). */
  waitMs: number;
  /** Slots left in the fleet bucket after this decision (fractional: one partly refilled). */
  tokens: number;
  cooldown: SharedCooldown | undefined;
}

/**
 * The fleet-wide half, kept in the token store (store/quota.ts). Every method rejects when the
 * store is unreachable, slow or answers an error; the guard then applies limits alone.
 */
export interface SharedQuota {
  /** Take up to `want` slots of the fleet bucket (and report a cooldown in force). */
  take(want: number): Promise<SharedDecision>;
  /** Start (or extend) the fleet cooldown to `ms` from now on the store's clock. */
  startCooldown(status: CooldownStatus, ms: number): Promise<void>;
  /** The fleet cooldown in force, if any. */
  readCooldown(): Promise<SharedCooldown | undefined>;
}

export interface QuotaGuardMetrics {
  /** Observed once per request admitted under a rate limit: seconds it waited (0 if none). */
  rateLimitWait: { observe(seconds: number): void };
}

export interface QuotaGuardOptions {
  rateLimit: RateLimit | undefined;
  /** Longest wait for a rate-limit slot (`upstream.queueMs`); then 429 `rate_limited`. */
  queueMs: number;
  /** Cap on a cooldown taken from `Retry-After` (`upstream.maxCooldownSeconds`). */
  maxCooldownSeconds: number;
  /** Most requests waiting at once (the proxy passes `proxy.maxInFlight`). Default 10000. */
  maxQueued?: number;
  clock: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;
  metrics: QuotaGuardMetrics;
  logger: Logger;
  /** The fleet-wide store half; absent: this process alone. */
  shared?: SharedQuota;
  /** How often the fleet cooldown is read from the store (docs/quota-guard.md: applies within 0.5 s). */
  sharedPollMs?: number;
  /** A store call slower than this counts as a failure (docs/quota-guard.md: slow > 500 ms). */
  sharedTimeoutMs?: number;
}

/** JSON-safe guard state for `/status`. */
export interface QuotaStatus {
  cooldown: { status: CooldownStatus; secondsLeft: number; until: string } | null;
  rateLimit: {
    count: number;
    periodSeconds: number;
    queueMs: number;
    /** Whole slots in this process's bucket (the local one; the store's when fleet-wide). */
    tokens: number;
    queued: number;
  } | null;
  /** `off`: no store; `store`: fleet-wide; `local`: store unreachable, this process limits alone. */
  fleet: 'off' | 'store' | 'local';
  storeError: string | null;
}

interface Waiter {
  resolve(): void;
  reject(reason: unknown): void;
  enqueuedAt: number;
  timer: TimerHandle;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  /** Its deadline passed while a store decision was pending: settled when that decision is. */
  expired: boolean;
}

export const DEFAULT_MAX_QUEUED = 10_000;
const DEFAULT_SHARED_POLL_MS = 250;
const DEFAULT_SHARED_TIMEOUT_MS = 500;

/** What a waiter whose client left rejects with: the caller's abort reason. */
function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('the client left while waiting for a slot');
}

function waiterGone(reject: (reason: Error) => void, signal: AbortSignal): void {
  reject(abortReason(signal));
}

class StoreTimeout extends Error {
  constructor(ms: number) {
    super(`the store did not answer within ${ms} ms`);
    this.name = 'StoreTimeout';
  }
}

/** Only these answers are read for a cooldown (their `Retry-After`): 429 and 503. */
export function mayStartCooldown(status: number): status is CooldownStatus {
  return status === 429 || status === 503;
}

export class QuotaGuard {
  private readonly clock: QuotaGuardOptions['clock'];
  private readonly logger: Logger;
  private readonly metrics: QuotaGuardMetrics;
  private readonly queueMs: number;
  private readonly maxCooldownMs: number;
  private readonly maxQueued: number;
  private readonly limit: RateLimit | undefined;
  /** This process's bucket: the only one without a store, the fallback with one. */
  private readonly bucket: TokenBucket | undefined;
  private readonly shared: SharedQuota | undefined;
  private readonly sharedTimeoutMs: number;
  private readonly sharedPollMs: number;

  /** 0 when none; else the local time the cooldown ends. */
  private cooldownUntil = 0;
  private cooldownStatus: CooldownStatus = 429;
  /** FIFO: a Set keeps insertion order and removes a leaving waiter in O(1). */
  private readonly queue = new Set<Waiter>();
  private pumpTimer: TimerHandle | undefined;
  private pumping = false;

  private sharedUp = true;
  private sharedError: string | null = null;
  /** The fleet bucket as the store last reported it, refilled locally: admission estimates only. */
  private readonly mirror: TokenBucket | undefined;
  private pollTimer: TimerHandle | undefined;
  private polling = false;
  private closed = false;

  constructor(options: QuotaGuardOptions) {
    this.clock = options.clock;
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.queueMs = options.queueMs;
    this.maxCooldownMs = options.maxCooldownSeconds * 1000;
    this.maxQueued = options.maxQueued ?? DEFAULT_MAX_QUEUED;
    this.limit = options.rateLimit;
    this.bucket =
      options.rateLimit === undefined
        ? undefined
        : new TokenBucket(options.rateLimit, this.clock.now());
    this.shared = options.shared;
    this.sharedTimeoutMs = options.sharedTimeoutMs ?? DEFAULT_SHARED_TIMEOUT_MS;
    this.sharedPollMs = options.sharedPollMs ?? DEFAULT_SHARED_POLL_MS;
    this.mirror =
      options.rateLimit === undefined
        ? undefined
        : new TokenBucket(options.rateLimit, this.clock.now());
  }

  /** True when requests may wait here (a rate limit is set): callers pass an AbortSignal then. */
  get limited(): boolean {
    return this.bucket !== undefined;
  }

  /** Start reading the fleet cooldown from the store (no-op without one). */
  start(): void {
    if (this.shared === undefined || this.pollTimer !== undefined || this.closed) return;
    this.schedulePoll();
  }

  /** Stop the store poll. Waiters still queued get their slot or their deadline as usual. */
  close(): void {
    this.closed = true;
    if (this.pollTimer !== undefined) this.clock.clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
  }

  /**
   * Admission before a request goes upstream. Returns undefined when it may go now, a promise when
   * it must wait for a slot (resolves when it has one; rejects with `signal.reason` when the
   * client leaves), and throws a SidecarError when the sidecar answers itself: during a cooldown
   * (`upstream_rate_limited`/`upstream_unavailable`) or when no slot can come within
   * `upstream.queueMs` (`rate_limited`). Each with `Retry-After`.
   */
  admit(signal?: AbortSignal): Promise<void> | undefined {
    if (this.cooldownUntil !== 0) this.refuseDuringCooldown();
    const bucket = this.bucket;
    if (bucket === undefined) return undefined;
    const now = this.clock.now();
    const fleet = this.sharedActive();
    if (!fleet && this.queue.size === 0 && bucket.take(1, now) === 1) {
      this.metrics.rateLimitWait.observe(0);
      return undefined;
    }
    const expected = this.expectedWaitMs(this.queue.size + 1, now, fleet);
    if (expected > this.queueMs) throw this.rateLimited(expected, 'no slot');
    if (this.queue.size >= this.maxQueued)
      throw this.rateLimited(expected, 'the wait queue is full');
    return this.enqueue(now, signal);
  }

  /**
   * Look at an upstream answer's status line and headers: a 429 or 503 with a valid, future
   * `Retry-After` starts a cooldown (capped). Anything else is ignored at the cost of one compare.
   */
  observe(status: number, headers: Record<string, HeaderValue>): void {
    if (!mayStartCooldown(status)) return;
    const now = this.clock.now();
    const ms = retryAfterMs(headers['retry-after'], now, headers.date, headers.age);
    // A 429 without Retry-After starts none (docs/quota-guard.md); neither does a time already past.
    if (ms === undefined || ms <= 0) return;
    const capped = Math.min(ms, this.maxCooldownMs);
    this.logger.warn(
      {
        status,
        retryAfter: headers['retry-after'],
        cooldownSeconds: capped / 1000,
        capped: capped < ms,
      },
      'upstream asked to back off: cooling down',
    );
    this.applyCooldown(status, capped, now);
    if (this.shared !== undefined && this.sharedActive()) {
      this.withTimeout(this.shared.startCooldown(status, capped)).then(
        () => this.markSharedUp(),
        (err: unknown) => this.markSharedDown(err),
      );
    }
  }

  /** Seconds left of the cooldown in force, 0 if none (the cooldown gauge). */
  cooldownSecondsLeft(): number {
    const left = this.cooldownUntil - this.clock.now();
    return left > 0 ? left / 1000 : 0;
  }

  status(): QuotaStatus {
    const now = this.clock.now();
    const left = this.cooldownUntil - now;
    const fleet = this.shared === undefined ? 'off' : this.sharedUp ? 'store' : 'local';
    return {
      cooldown:
        left > 0
          ? {
              status: this.cooldownStatus,
              secondsLeft: wholeSecondsLeft(left),
              until: new Date(this.cooldownUntil).toISOString(),
            }
          : null,
      rateLimit:
        this.limit === undefined || this.bucket === undefined
          ? null
          : {
              count: this.limit.count,
              periodSeconds: this.limit.periodMs / 1000,
              queueMs: this.queueMs,
              tokens: Math.floor((fleet === 'store' ? this.mirror! : this.bucket).available(now)),
              queued: this.queue.size,
            },
      fleet,
      storeError: this.sharedError,
    };
  }

  // --- cooldown -------------------------------------------------------------------------------

  private refuseDuringCooldown(): void {
    const left = this.cooldownUntil - this.clock.now();
    if (left <= 0) {
      this.cooldownUntil = 0;
      return;
    }
    throw this.cooldownError(left);
  }

  private cooldownError(leftMs: number): SidecarError {
    const seconds = wholeSecondsLeft(leftMs);
    return this.cooldownStatus === 429
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

  /** Extend (never shorten) the cooldown; queued requests would be sent into it: refuse them. */
  private applyCooldown(status: CooldownStatus, ms: number, now: number): void {
    const until = now + ms;
    if (until <= this.cooldownUntil) return;
    this.cooldownUntil = until;
    this.cooldownStatus = status;
    if (this.queue.size > 0) {
      const error = this.cooldownError(ms);
      for (const waiter of this.queue) this.settle(waiter, error);
    }
  }

  // --- rate limit -----------------------------------------------------------------------------

  private rateLimited(expectedMs: number, why: string): SidecarError {
    const seconds = wholeSecondsLeft(expectedMs);
    return new SidecarError(
      'rate_limited',
      `${why} under the upstream rate limit within ${this.queueMs} ms; retry in ${seconds} s`,
      { retryAfterSeconds: seconds },
    );
  }

  /** Expected wait of the request at `position` (1 = head), if nobody ahead leaves. */
  private expectedWaitMs(position: number, now: number, fleet: boolean): number {
    // Fleet-wide the store decides; the mirror of its last answer gives an optimistic estimate.
    return (fleet ? this.mirror! : this.bucket!).msUntil(position, now);
  }

  private enqueue(now: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        waiterGone(reject, signal);
        return;
      }
      const waiter: Waiter = {
        resolve,
        reject,
        enqueuedAt: now,
        timer: this.clock.setTimeout(() => this.expire(waiter), this.queueMs),
        signal,
        onAbort: undefined,
        expired: false,
      };
      if (signal !== undefined) {
        waiter.onAbort = () => this.leave(waiter);
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.queue.add(waiter);
      this.pump();
    });
  }

  /** Remove a waiter and settle it: resolve (`reason` undefined) or reject. */
  private settle(waiter: Waiter, reason?: unknown): void {
    if (!this.queue.delete(waiter)) return;
    this.clock.clearTimeout(waiter.timer);
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    if (reason === undefined) waiter.resolve();
    else waiter.reject(reason);
    if (this.queue.size === 0 && this.pumpTimer !== undefined) {
      this.clock.clearTimeout(this.pumpTimer);
      this.pumpTimer = undefined;
    }
  }

  /** The client left while waiting: its place goes to the next one at once. */
  private leave(waiter: Waiter): void {
    this.settle(waiter, abortReason(waiter.signal));
  }

  private expire(waiter: Waiter): void {
    if (!this.queue.has(waiter)) return;
    if (this.pumping) {
      // A store decision is pending: if the store fails, the local bucket must still get its say,
      // or a store outage would refuse requests (docs/quota-guard.md: none fails because of the store).
      waiter.expired = true;
      return;
    }
    // A slot due at the very deadline goes to the waiter, whichever timer fired first.
    if (this.pumpTimer !== undefined) this.pump();
    this.refuseExpired(waiter);
  }

  private refuseExpired(waiter: Waiter): void {
    if (!this.queue.has(waiter)) return;
    const now = this.clock.now();
    this.settle(
      waiter,
      this.rateLimited(this.expectedWaitMs(1, now, this.sharedActive()), 'no slot'),
    );
  }

  /** Waiters whose deadline passed during a store decision, once it is made. */
  private refuseAllExpired(): void {
    for (const waiter of this.queue) if (waiter.expired) this.refuseExpired(waiter);
  }

  private grant(count: number, now: number): void {
    for (const waiter of this.queue) {
      if (count <= 0) break;
      count -= 1;
      this.metrics.rateLimitWait.observe((now - waiter.enqueuedAt) / 1000);
      this.settle(waiter);
    }
  }

  private armPump(ms: number): void {
    if (this.pumpTimer !== undefined) this.clock.clearTimeout(this.pumpTimer);
    this.pumpTimer = this.clock.setTimeout(
      () => {
        this.pumpTimer = undefined;
        this.pump();
      },
      Math.max(1, ms),
    );
  }

  /** Hand free slots to the head of the queue, in order; wake up again when the next one is due. */
  private pump(): void {
    if (this.pumping || this.queue.size === 0) return;
    const now = this.clock.now();
    if (this.cooldownUntil > now) {
      const error = this.cooldownError(this.cooldownUntil - now);
      for (const waiter of this.queue) this.settle(waiter, error);
      return;
    }
    if (this.sharedActive()) {
      this.pumpShared();
      return;
    }
    const bucket = this.bucket!;
    this.grant(bucket.take(this.queue.size, now), now);
    if (this.queue.size > 0) this.armPump(bucket.msUntil(1, now));
  }

  private pumpShared(): void {
    const shared = this.shared!;
    this.pumping = true;
    this.withTimeout(shared.take(this.queue.size)).then(
      (decision) => {
        this.pumping = false;
        this.markSharedUp();
        const now = this.clock.now();
        this.mirror!.set(decision.tokens, now);
        if (decision.cooldown !== undefined) {
          this.applyCooldown(decision.cooldown.status, decision.cooldown.msLeft, now);
        }
        // Slots granted for waiters that left meanwhile are spent: the fleet stays under the limit.
        this.grant(decision.granted, now);
        this.refuseAllExpired();
        if (this.queue.size === 0) return;
        // Slots left but more waiters than asked for (they came during the call): ask again now.
        if (decision.waitMs === 0 && decision.granted > 0) this.pump();
        else this.armPump(decision.waitMs);
      },
      (err: unknown) => {
        this.pumping = false;
        this.markSharedDown(err);
        this.pump();
        this.refuseAllExpired();
      },
    );
  }

  // --- the store ------------------------------------------------------------------------------

  /**
   * Fleet-wide decisions while the store answers. After a failure the process decides alone until
   * the background cooldown poll reaches the store again: requests never wait on a dead store.
   */
  private sharedActive(): boolean {
    return this.shared !== undefined && this.sharedUp;
  }

  private markSharedUp(): void {
    if (this.sharedUp) return;
    this.sharedUp = true;
    this.sharedError = null;
    this.logger.info('quota guard: store reachable again; rate limit and cooldown are fleet-wide');
  }

  private markSharedDown(err: unknown): void {
    this.sharedError = err instanceof Error ? err.message : String(err);
    if (!this.sharedUp) return;
    this.sharedUp = false;
    this.logger.warn(
      { err },
      'quota guard: store unreachable; this process applies the rate limit and cooldowns alone',
    );
  }

  private withTimeout<T>(work: Promise<T>): Promise<T> {
    const ms = this.sharedTimeoutMs;
    return new Promise<T>((resolve, reject) => {
      const timer = this.clock.setTimeout(() => reject(new StoreTimeout(ms)), ms);
      work.then(
        (value) => {
          this.clock.clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          this.clock.clearTimeout(timer);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }

  private schedulePoll(): void {
    const timer = this.clock.setTimeout(() => this.poll(), this.sharedPollMs);
    timer.unref?.();
    this.pollTimer = timer;
  }

  /** Read the fleet cooldown: one taken by another process applies here within one poll. */
  private poll(): void {
    this.pollTimer = undefined;
    if (this.closed || this.polling) return;
    this.polling = true;
    this.withTimeout(this.shared!.readCooldown()).then(
      (cooldown) => {
        this.polling = false;
        this.markSharedUp();
        if (cooldown !== undefined && cooldown.msLeft > 0) {
          const now = this.clock.now();
          if (this.cooldownUntil <= now) {
            this.logger.warn(
              { status: cooldown.status, cooldownSeconds: cooldown.msLeft / 1000 },
              'fleet cooldown taken by another sidecar: cooling down',
            );
          }
          this.applyCooldown(cooldown.status, cooldown.msLeft, now);
        }
        if (!this.closed) this.schedulePoll();
      },
      (err: unknown) => {
        this.polling = false;
        this.markSharedDown(err);
        if (!this.closed) this.schedulePoll();
      },
    );
  }
}
