/**
 * The quota guard (docs/quota-guard.md): spends the API's per-organisation quota on behalf of
 * every caller, with a cooldown taken from a 429/503 `Retry-After` (cooldown.ts) and an optional
 * rate limit, a token bucket whose slots are shared fairly between callers, each waiting a bounded
 * time (fair-queue.ts, callers.ts), slots handed out as they come due (slot-pump.ts). With a
 * store both are fleet-wide (fleet-link.ts); while it is
 * down each process applies them alone. With no limit and no cooldown, `admit` is two comparisons:
 * no allocation, no promise.
 */
import { SidecarError } from '../../errors.js';
import type { CooldownStatus, SharedCooldown } from '../../fleet/ports.js';
import { wholeSecondsLeft, type HeaderValue } from '../../http-fields/retry-after.js';
import type { Logger } from '../../telemetry/logger.js';
import { TokenBucket, type RateLimit } from './bucket.js';
import { Cooldown, mayStartCooldown } from './cooldown.js';
import { pollWhileDown } from './cooldown-source.js';
import { FleetLink, SHARED_POLL_MS } from './fleet-link.js';
import { Callers } from './callers.js';
import { FairQueue, type CallerState, type Waiter } from './fair-queue.js';
import type { QuotaGuardMetrics, QuotaGuardOptions, QuotaStatus } from './guard-contract.js';
import { rateLimitFields, rateLimitPolicy, type RateLimitFields } from './ratelimit-fields.js';
import { SlotPump } from './slot-pump.js';

export type { RateLimit } from './bucket.js';
export type { QuotaGuardMetrics, QuotaGuardOptions, QuotaStatus } from './guard-contract.js';
export type {
  CooldownStatus,
  SharedCooldown,
  SharedDecision,
  SharedQuota,
} from '../../fleet/ports.js';

export const DEFAULT_MAX_QUEUED = 10_000;

export class QuotaGuard {
  private readonly clock: QuotaGuardOptions['clock'];
  private readonly logger: Logger;
  private readonly queueMs: number;
  private readonly maxCooldownMs: number;
  private readonly maxQueued: number;
  /** Most waiters of one caller: half of `maxQueued` when a process serves several callers. */
  private readonly maxQueuedPerCaller: number;
  private readonly limit: RateLimit | undefined;
  private readonly policy: string | undefined;
  /** This process's bucket: the only one without a store, the fallback with one. */
  private readonly bucket: TokenBucket | undefined;
  /** The fleet bucket as the store last reported it, refilled locally: admission estimates only. */
  private readonly mirror: TokenBucket | undefined;
  private readonly fleet: FleetLink | undefined;
  private readonly cooldown = new Cooldown();
  private readonly queue: FairQueue;
  readonly callers: Callers;
  private readonly metrics: QuotaGuardMetrics;
  private readonly pump: SlotPump;

  constructor(options: QuotaGuardOptions) {
    this.clock = options.clock;
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.queueMs = options.queueMs;
    this.maxCooldownMs = options.maxCooldownSeconds * 1000;
    this.maxQueued = options.maxQueued ?? DEFAULT_MAX_QUEUED;
    this.callers =
      options.callers ?? new Callers({ own: 'default', header: undefined, policies: [] });
    this.maxQueuedPerCaller = this.callers.several
      ? Math.max(1, Math.floor(this.maxQueued / 2))
      : this.maxQueued;
    this.limit = options.rateLimit;
    this.policy = this.limit === undefined ? undefined : rateLimitPolicy(this.limit);
    const now = this.clock.now();
    this.bucket = this.limit === undefined ? undefined : new TokenBucket(this.limit, now);
    this.mirror = this.limit === undefined ? undefined : new TokenBucket(this.limit, now);
    this.fleet =
      options.shared === undefined
        ? undefined
        : new FleetLink(
            // Under a rate limit each admission's store decision reads the cooldown itself.
            this.limit === undefined ? options.shared : pollWhileDown(options.shared),
            this.clock,
            options.sharedPollMs ?? SHARED_POLL_MS,
            (c) => this.fleetCooldown(c),
          );
    this.queue = new FairQueue({
      clock: this.clock,
      queueMs: this.queueMs,
      onDeadline: (waiter) => this.pump.expire(waiter),
      onEmpty: () => this.pump.disarm(),
      waited: (seconds, caller) => this.admitted(seconds, caller),
    });
    this.pump = new SlotPump({
      clock: this.clock,
      queue: this.queue,
      bucket: this.bucket,
      mirror: this.mirror,
      fleet: this.fleet,
      cooldown: this.cooldown,
      refuseAll: (refusal) => this.refuseAll(refusal),
      applyCooldown: (status, ms, now) => this.applyCooldown(status, ms, now),
      refuseExpired: (waiter) => this.refuseExpired(waiter),
    });
  }

  /** True when requests may wait here (a rate limit is set): callers pass an AbortSignal then. */
  get limited(): boolean {
    return this.bucket !== undefined;
  }

  /** Start reading the fleet cooldown from the store (no-op without one). */
  start(): void {
    this.fleet?.start();
  }

  /** Stop the store poll. Waiters still queued get their slot or their deadline as usual. */
  close(): void {
    this.fleet?.close();
  }

  /**
   * Admission before a request goes upstream. Returns undefined when it may go now, a promise when
   * it must wait for a slot (resolves when it has one; rejects with `signal.reason` when the
   * client leaves), and throws a SidecarError when the sidecar answers itself: during a cooldown
   * (`upstream_rate_limited`/`upstream_unavailable`) or when no slot can come for `caller` within
   * `upstream.queueMs` (`rate_limited`). Each with `Retry-After`.
   */
  admit(signal?: AbortSignal, caller?: CallerState): Promise<void> | undefined {
    if (this.cooldown.until !== 0) this.checkCooldown(caller);
    const bucket = this.bucket;
    if (bucket === undefined) return undefined;
    const who = caller ?? this.callers.own;
    const now = this.clock.now();
    who.lastAsked = now;
    const fleet = this.fleetActive();
    if (!fleet && this.queue.size === 0 && bucket.take(1, now) === 1) {
      this.queue.charge(who);
      this.admitted(0, who);
      return undefined;
    }
    const expected = this.expectedWaitMs(who, now, fleet);
    if (expected > this.queueMs) throw this.refuse(who, expected, 'no slot');
    if (this.queue.size >= this.maxQueued)
      throw this.refuse(who, expected, 'the wait queue is full');
    if (this.callers.waiting(who) >= this.maxQueuedPerCaller)
      throw this.refuse(who, expected, `${who.name}'s waiters fill its share of the queue`);
    return this.queue.add(who, now, signal, () => this.pump.arrived());
  }

  /** The caller a request belongs to (callers.ts), active callers judged over the rate's period. */
  callerOf(headers: Record<string, string | string[] | undefined>, verified?: string): CallerState {
    const now = this.clock.now();
    const periodMs = this.limit?.periodMs ?? 0;
    return verified === undefined
      ? this.callers.of(headers, now, periodMs)
      : this.callers.named(verified, now, periodMs);
  }

  /**
   * Where `caller` stands, for the IETF RateLimit fields on its answer; undefined without a limit.
   * On a refusal `retryAfterSeconds` is its `Retry-After`, and `t` says the same.
   */
  fieldsFor(caller?: CallerState, retryAfterSeconds?: number): RateLimitFields | undefined {
    if (this.limit === undefined || this.policy === undefined) return undefined;
    const now = this.clock.now();
    const who = caller ?? this.callers.own;
    const bucket = this.estimate(this.fleetActive());
    const share = who.weight / this.callers.activeWeight(who, now, this.limit.periodMs);
    return rateLimitFields(this.policy, this.limit, bucket, share, now, retryAfterSeconds);
  }

  /**
   * Look at an upstream answer's status line and headers: a 429 or 503 with a valid, future
   * `Retry-After` starts a cooldown (capped). Anything else is ignored at the cost of one compare.
   */
  observe(status: number, headers: Record<string, HeaderValue>): void {
    if (!mayStartCooldown(status)) return;
    const now = this.clock.now();
    const ms = this.cooldown.askedFor(status, headers, now, this.maxCooldownMs, this.logger);
    if (ms === undefined) return;
    this.applyCooldown(status, ms, now);
    this.fleet?.publish(status, ms);
  }

  /** Seconds left of the cooldown in force, 0 if none (the cooldown gauge). */
  cooldownSecondsLeft(): number {
    const left = this.cooldown.until - this.clock.now();
    return left > 0 ? left / 1000 : 0;
  }

  status(): QuotaStatus {
    const now = this.clock.now();
    const fleet = this.fleet === undefined ? 'off' : this.fleet.active() ? 'store' : 'local';
    const limit = this.limit;
    const bucket = fleet === 'store' ? this.mirror : this.bucket;
    return {
      cooldown: this.cooldown.view(now),
      rateLimit:
        limit === undefined || bucket === undefined
          ? null
          : {
              count: limit.count,
              periodSeconds: limit.periodMs / 1000,
              queueMs: this.queueMs,
              tokens: Math.floor(bucket.available(now)),
              queued: this.queue.size,
              callers: this.callers.shares(now, limit.periodMs),
            },
      fleet,
      storeError: this.fleet?.error() ?? null,
    };
  }

  private fleetActive(): boolean {
    return this.fleet?.active() ?? false;
  }

  private fleetCooldown(cooldown: SharedCooldown): void {
    const now = this.clock.now();
    if (this.cooldown.until <= now) {
      this.logger.warn(
        { status: cooldown.status, cooldownSeconds: cooldown.msLeft / 1000 },
        'fleet cooldown taken by another sidecar: cooling down',
      );
    }
    this.applyCooldown(cooldown.status, cooldown.msLeft, now);
  }

  /** Under a limit a cooldown refusal counts as the caller's refused request. */
  private checkCooldown(caller: CallerState | undefined): void {
    try {
      this.cooldown.check(this.clock.now());
    } catch (err) {
      if (this.bucket !== undefined) this.counted(caller ?? this.callers.own, 'refused');
      throw err;
    }
  }

  /** Extend (never shorten) the cooldown; queued requests would be sent into it: refuse them. */
  private applyCooldown(status: CooldownStatus, ms: number, now: number): void {
    if (this.cooldown.extend(status, ms, now) && this.queue.size > 0) {
      this.refuseAll(this.cooldown.refusal(ms));
    }
  }

  /** Every waiter gets `refusal` (a cooldown started), each counted. */
  private refuseAll(refusal: SidecarError): void {
    for (const waiter of this.queue) {
      this.counted(waiter.caller, 'refused');
      this.queue.settle(waiter, refusal);
    }
  }

  private admitted(seconds: number, caller: CallerState): void {
    this.metrics.rateLimitWait.observe({ priority: caller.priority }, seconds);
    this.counted(caller, 'admitted');
  }

  private counted(caller: CallerState, outcome: 'admitted' | 'refused'): void {
    this.metrics.quotaRequests.inc({ caller: this.callers.label(caller), outcome });
  }

  /** 429 `rate_limited` for `caller`, counted, with `Retry-After` and its RateLimit fields. */
  private refuse(caller: CallerState, expectedMs: number, why: string): SidecarError {
    this.counted(caller, 'refused');
    const seconds = wholeSecondsLeft(expectedMs);
    return new SidecarError(
      'rate_limited',
      `${why} under the upstream rate limit within ${this.queueMs} ms; retry in ${seconds} s`,
      { retryAfterSeconds: seconds, fields: this.fieldsFor(caller, seconds) },
    );
  }

  /**
   * Expected wait of `caller`'s next request, if nobody ahead leaves: each of its waiters ahead
   * costs one slot of its own and the turns of the other callers waiting (by weight).
   */
  private expectedWaitMs(caller: CallerState, now: number, fleet: boolean): number {
    let competing = caller.weight;
    for (const other of this.queue.backlogged) if (other !== caller) competing += other.weight;
    const ahead = (caller.waiters.size * competing) / caller.weight;
    const estimate = this.estimate(fleet).msUntil(1 + ahead, now);
    // Fleet-wide, the turn the store named for this caller is a floor (slot-pump.ts).
    return fleet ? Math.max(estimate, this.pump.turnMs(caller, now)) : estimate;
  }

  /**
   * The bucket estimates read (under a limit): fleet-wide the store decides, and the mirror of its
   * last answer gives an optimistic estimate.
   */
  private estimate(fleet: boolean): TokenBucket {
    return fleet ? this.mirror! : this.bucket!;
  }

  private refuseExpired(waiter: Waiter): void {
    if (!this.queue.has(waiter)) return;
    const now = this.clock.now();
    const expected = this.estimate(this.fleetActive()).msUntil(1, now);
    this.queue.settle(waiter, this.refuse(waiter.caller, expected, 'no slot'));
  }
}
