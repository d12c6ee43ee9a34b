/**
 * The quota guard (docs/quota-guard.md): spends the API's per-organisation quota on behalf of
 * every caller, with a cooldown taken from a 429/503 `Retry-After` (cooldown.ts) and an optional
 * rate limit, a token bucket whose slots are shared fairly between callers, each waiting a bounded
 * time (fair-queue.ts, callers.ts), slots handed to the waiters as they come due. With a store
 * both are fleet-wide (fleet-link.ts): the store decides every slot, and while the bucket is
 * plentiful a decision may lease a caller a batch for its next requests (lease.ts); while the
 * store is down each process applies them alone. With no limit and no cooldown, `admit` is two
 * comparisons: no allocation, no promise.
 */
import type { TimerHandle } from '../../clock.js';
import { SidecarError } from '../../errors.js';
import type {
  CallerDemand,
  CooldownStatus,
  SharedCooldown,
  SharedQuota,
} from '../../fleet/ports.js';
import { wholeSecondsLeft, type HeaderValue } from '../../http-fields/retry-after.js';
import type { Logger } from '../../telemetry/logger.js';
import { TokenBucket, type RateLimit } from './bucket.js';
import { Cooldown, mayStartCooldown } from './cooldown.js';
import { pollWhileDown } from './cooldown-source.js';
import { FleetLink, SHARED_POLL_MS } from './fleet-link.js';
import { Callers } from './callers.js';
import { FairQueue, type CallerState, type Waiter } from './fair-queue.js';
import type { QuotaGuardMetrics, QuotaGuardOptions, QuotaStatus } from './guard-contract.js';
import { SlotLeases } from './lease.js';
import { rateLimitFields, rateLimitPolicy, type RateLimitFields } from './ratelimit-fields.js';

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
  /** Leased batches of fleet slots (with a store and a limit). */
  private readonly leases: SlotLeases | undefined;
  /** The wake-up for the next slot, when it fires (clock ms). */
  #timer: TimerHandle | undefined;
  #due = 0;
  /** A store decision is pending. */
  #pumping = false;
  /**
   * The callers of the last store decision while its wait is armed: the store knows they want
   * slots and said when this member's turn comes (fleet/quota.ts TAKE), so another waiter of
   * theirs asks nothing before then.
   */
  readonly #asked = new Set<CallerState>();

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
    this.leases =
      this.limit === undefined || this.fleet === undefined ? undefined : new SlotLeases(this.limit);
    this.queue = new FairQueue({
      clock: this.clock,
      queueMs: this.queueMs,
      onDeadline: (waiter) => this.#expire(waiter),
      onEmpty: () => this.#disarm(),
      waited: (seconds, caller) => this.admitted(seconds, caller),
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
    if (
      fleet
        ? who.waiters.size === 0 && this.leases?.take(who, now) === true
        : this.queue.size === 0 && bucket.take(1, now) === 1
    ) {
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
    return this.queue.add(who, now, signal, () => this.#arrived());
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

  /**
   * Extend (never shorten) the cooldown; queued requests and leased slots would be sent into it:
   * refuse the one, drop the other.
   */
  private applyCooldown(status: CooldownStatus, ms: number, now: number): void {
    if (!this.cooldown.extend(status, ms, now)) return;
    this.leases?.dropAll();
    if (this.queue.size > 0) this.refuseAll(this.cooldown.refusal(ms));
  }

  /** Every waiter gets `refusal` (a cooldown started), each counted. */
  private refuseAll(refusal: SidecarError): void {
    for (const waiter of this.queue) {
      this.counted(waiter.caller, 'refused');
      this.queue.settle(waiter, refusal);
    }
  }

  private admitted(seconds: number, caller: CallerState): void {
    this.leases?.admitted(caller, this.clock.now());
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
    // Fleet-wide, the turn the store named for this caller is a floor.
    return fleet ? Math.max(estimate, this.#turnMs(caller, now)) : estimate;
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

  /** `waiter`'s deadline passed. */
  #expire(waiter: Waiter): void {
    if (!this.queue.has(waiter)) return;
    if (this.#pumping) {
      // A store decision is pending: if the store fails, the local bucket must still get its say,
      // or a store outage would refuse requests (docs/quota-guard.md: none fails because of the store).
      waiter.expired = true;
      return;
    }
    // A slot due at the very deadline goes to the waiter, whichever timer fired first; before
    // its turn the store has none for it (no store call per refused waiter).
    if (this.#timer !== undefined && (!this.fleetActive() || this.#due <= this.clock.now()))
      this.#pump();
    this.refuseExpired(waiter);
  }

  /**
   * A waiter joined the queue. Fleet-wide, while the store's wait is armed and every caller
   * waiting was in that decision, it waits for the turn the store named: one store call per turn
   * of this member, not one per request (docs/capacity.md).
   */
  #arrived(): void {
    if (this.#timer !== undefined && !this.#pumping && this.fleetActive()) {
      let known = true;
      for (const caller of this.queue.backlogged) known &&= this.#asked.has(caller);
      if (known) return;
    }
    this.#pump();
  }

  /**
   * How long until the turn the store named for `caller` (0 when none is armed): an arrival that
   * asks nothing of the store is refused at once when its turn is beyond its deadline.
   */
  #turnMs(caller: CallerState, now: number): number {
    if (this.#timer === undefined || !this.#asked.has(caller)) return 0;
    return Math.max(0, this.#due - now);
  }

  /** Waiters whose deadline passed during a store decision, once it is made. */
  #refuseAllExpired(): void {
    for (const waiter of this.queue) if (waiter.expired) this.refuseExpired(waiter);
  }

  #disarm(): void {
    this.#asked.clear();
    if (this.#timer === undefined) return;
    this.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(ms: number): void {
    this.#disarm();
    this.#due = this.clock.now() + Math.max(1, ms);
    this.#timer = this.clock.setTimeout(
      () => {
        this.#timer = undefined;
        this.#asked.clear();
        this.#pump();
      },
      Math.max(1, ms),
    );
  }

  /** Hand free slots to the waiters, in fair order; wake up again when the next one is due. */
  #pump(): void {
    const queue = this.queue;
    if (this.#pumping || queue.size === 0) return;
    const { cooldown, fleet } = this;
    const now = this.clock.now();
    if (cooldown.until > now) {
      this.refuseAll(cooldown.refusal(cooldown.until - now));
      return;
    }
    if (fleet !== undefined && fleet.active()) {
      this.#pumpShared(fleet.shared, queue);
      return;
    }
    const bucket = this.bucket!;
    queue.grant(bucket.take(queue.size, now), now);
    if (queue.size > 0) this.#arm(bucket.msUntil(1, now));
  }

  #pumpShared(shared: SharedQuota, queue: FairQueue): void {
    this.#pumping = true;
    const asking = [...queue.backlogged];
    const asked = this.clock.now();
    const demands: CallerDemand[] = asking.map((c) => ({
      caller: c.name,
      weight: c.weight,
      priority: c.priority,
      want: c.waiters.size,
      lease: this.leases?.size(c, asked) ?? 0,
    }));
    shared.take(demands).then(
      (decision) => {
        this.#pumping = false;
        const now = this.clock.now();
        this.mirror!.set(decision.tokens, now);
        if (decision.cooldown !== undefined) {
          this.applyCooldown(decision.cooldown.status, decision.cooldown.msLeft, now);
        }
        // Slots beyond the caller's waiters now (its batch, or waiters that left meanwhile) are
        // leased to its next requests; without a lease they are spent: the fleet stays under the limit.
        asking.forEach((caller, i) => {
          const granted = decision.grants[i] ?? 0;
          const given = Math.min(granted, caller.waiters.size);
          queue.grantTo(caller, given, now);
          if (decision.cooldown === undefined) this.leases?.add(caller, granted - given, now);
        });
        this.#refuseAllExpired();
        if (queue.size === 0) return;
        // Slots left and granted: more waiters came during the call, ask again now.
        if (decision.granted > 0 && decision.tokens >= 1) this.#pump();
        else {
          this.#arm(decision.waitMs);
          for (const caller of asking) this.#asked.add(caller);
        }
      },
      () => {
        // The connection marked the store down: the local bucket decides from here.
        this.#pumping = false;
        this.#pump();
        this.#refuseAllExpired();
      },
    );
  }
}
