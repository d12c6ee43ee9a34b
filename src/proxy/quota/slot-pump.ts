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
import type { FairQueue, Waiter } from './fair-queue.js';
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
  /** A store decision is pending. */
  #pumping = false;

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
    // A slot due at the very deadline goes to the waiter, whichever timer fired first.
    if (this.#timer !== undefined) this.pump();
    this.#o.refuseExpired(waiter);
  }

  /** Waiters whose deadline passed during a store decision, once it is made. */
  #refuseAllExpired(): void {
    for (const waiter of this.#o.queue) if (waiter.expired) this.#o.refuseExpired(waiter);
  }

  disarm(): void {
    if (this.#timer === undefined) return;
    this.#o.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(ms: number): void {
    this.disarm();
    this.#timer = this.#o.clock.setTimeout(
      () => {
        this.#timer = undefined;
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
        else this.#arm(decision.waitMs);
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
