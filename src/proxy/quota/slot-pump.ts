/**
 * Hands free rate-limit slots to the waiters in fair order (fair-queue.ts), from this process's
 * bucket or, fleet-wide, from the store's decision (docs/quota-guard.md); wakes again when the
 * next slot is due. A waiter whose deadline passes is refused, unless a slot due at that very
 * moment is its; during a store decision its refusal waits for that decision.
 */
import type { Clock, TimerHandle } from '../../clock.js';
import type { SidecarError } from '../../errors.js';
import type { CallerDemand, CooldownStatus, SharedQuota } from '../../fleet/ports.js';
import type { TokenBucket } from './bucket.js';
import type { Cooldown } from './cooldown.js';
import type { CallerState, FairQueue, Waiter } from './fair-queue.js';
import type { FleetLink } from './fleet-link.js';

export interface SlotPumpOptions {
  clock: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;
  queue: FairQueue;
  /** This process's bucket (under a limit). */
  bucket: TokenBucket | undefined;
  /** The fleet bucket as the store last reported it. */
  mirror: TokenBucket | undefined;
  fleet: FleetLink | undefined;
  cooldown: Cooldown;
  /** Every waiter gets `refusal` (a cooldown is in force), each counted. */
  refuseAll(refusal: SidecarError): void;
  /** The store reported a cooldown. */
  applyCooldown(status: CooldownStatus, ms: number, now: number): void;
  /** A waiter's deadline passed with no slot for it: its 429. */
  refuseExpired(waiter: Waiter): void;
}

export class SlotPump {
  readonly #o: SlotPumpOptions;
  #timer: TimerHandle | undefined;
  /** When the armed timer fires (clock ms). */
  #due = 0;
  /** A store decision is pending. */
  #pumping = false;
  /**
   * The callers of the last store decision while its wait is armed: the store knows they want
   * slots and said when this member's turn comes (fleet/quota.ts TAKE), so another waiter of
   * theirs asks nothing before then.
   */
  readonly #asked = new Set<CallerState>();

  constructor(options: SlotPumpOptions) {
    this.#o = options;
  }

  /** `waiter`'s deadline passed. */
  expire(waiter: Waiter): void {
    if (!this.#o.queue.has(waiter)) return;
    if (this.#pumping) {
      // A store decision is pending: if the store fails, the local bucket must still get its say,
      // or a store outage would refuse requests (docs/quota-guard.md: none fails because of the store).
      waiter.expired = true;
      return;
    }
    // A slot due at the very deadline goes to the waiter, whichever timer fired first; before
    // its turn the store has none for it (no store call per refused waiter).
    if (this.#timer !== undefined && (!this.#fleetActive() || this.#due <= this.#o.clock.now()))
      this.pump();
    this.#o.refuseExpired(waiter);
  }

  /**
   * A waiter joined the queue. Fleet-wide, while the store's wait is armed and every caller
   * waiting was in that decision, it waits for the turn the store named: one store call per turn
   * of this member, not one per request (docs/capacity.md).
   */
  arrived(): void {
    if (this.#timer !== undefined && !this.#pumping && this.#fleetActive()) {
      let known = true;
      for (const caller of this.#o.queue.backlogged) known &&= this.#asked.has(caller);
      if (known) return;
    }
    this.pump();
  }

  /**
   * How long until the turn the store named for `caller` (0 when none is armed): an arrival that
   * asks nothing of the store is refused at once when its turn is beyond its deadline.
   */
  turnMs(caller: CallerState, now: number): number {
    if (this.#timer === undefined || !this.#asked.has(caller)) return 0;
    return Math.max(0, this.#due - now);
  }

  #fleetActive(): boolean {
    return this.#o.fleet?.active() ?? false;
  }

  /** Waiters whose deadline passed during a store decision, once it is made. */
  #refuseAllExpired(): void {
    for (const waiter of this.#o.queue) if (waiter.expired) this.#o.refuseExpired(waiter);
  }

  disarm(): void {
    this.#asked.clear();
    if (this.#timer === undefined) return;
    this.#o.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(ms: number): void {
    this.disarm();
    this.#due = this.#o.clock.now() + Math.max(1, ms);
    this.#timer = this.#o.clock.setTimeout(
      () => {
        this.#timer = undefined;
        this.#asked.clear();
        this.pump();
      },
      Math.max(1, ms),
    );
  }

  /** Hand free slots to the waiters, in fair order; wake up again when the next one is due. */
  pump(): void {
    const queue = this.#o.queue;
    if (this.#pumping || queue.size === 0) return;
    const { cooldown, fleet } = this.#o;
    const now = this.#o.clock.now();
    if (cooldown.until > now) {
      this.#o.refuseAll(cooldown.refusal(cooldown.until - now));
      return;
    }
    if (fleet !== undefined && fleet.active()) {
      this.#pumpShared(fleet.shared, queue);
      return;
    }
    const bucket = this.#o.bucket!;
    queue.grant(bucket.take(queue.size, now), now);
    if (queue.size > 0) this.#arm(bucket.msUntil(1, now));
  }

  #pumpShared(shared: SharedQuota, queue: FairQueue): void {
    this.#pumping = true;
    const asking = [...queue.backlogged];
    const demands: CallerDemand[] = asking.map((c) => ({
      caller: c.name,
      weight: c.weight,
      priority: c.priority,
      want: c.waiters.size,
    }));
    shared.take(demands).then(
      (decision) => {
        this.#pumping = false;
        const now = this.#o.clock.now();
        this.#o.mirror!.set(decision.tokens, now);
        if (decision.cooldown !== undefined) {
          this.#o.applyCooldown(decision.cooldown.status, decision.cooldown.msLeft, now);
        }
        // Slots granted for waiters that left meanwhile are spent: the fleet stays under the limit.
        asking.forEach((caller, i) => queue.grantTo(caller, decision.grants[i] ?? 0, now));
        this.#refuseAllExpired();
        if (queue.size === 0) return;
        // Slots left and granted: more waiters came during the call, ask again now.
        if (decision.granted > 0 && decision.tokens >= 1) this.pump();
        else {
          this.#arm(decision.waitMs);
          for (const caller of asking) this.#asked.add(caller);
        }
      },
      () => {
        // The connection marked the store down: the local bucket decides from here.
        this.#pumping = false;
        this.pump();
        this.#refuseAllExpired();
      },
    );
  }
}
