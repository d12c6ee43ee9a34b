/**
 * Leased batches of fleet quota slots (docs/capacity.md "Leased batches"): a member's store
 * decision may grant a caller more slots than it has waiters; the rest are this member's for
 * {@link LEASE_MS}, spent by that caller's next requests without a store call, and dropped unused
 * when the lease ends or a cooldown starts. A batch is sized from the caller's admissions over the
 * last lease window, at most {@link MAX_BATCH} and at most the limit's own rate over the window.
 */
import type { RateLimit } from './bucket.js';
import type { CallerState } from './fair-queue.js';

/**
 * How long leased slots stay spendable. It is also how old the cooldown a member acts on may be
 * while it serves from a lease: every lease comes from a store decision that read the cooldown.
 */
export const LEASE_MS = 500;

/** Most slots one batch adds for one caller: the bound of fair share's error across the fleet. */
export const MAX_BATCH = 64;

interface CallerLease {
  /** Slots still spendable until `until` (local clock). */
  slots: number;
  until: number;
  /** Admissions in the window starting at `windowStart`, and in the window before it. */
  windowStart: number;
  count: number;
  previous: number;
}

export class SlotLeases {
  readonly #leases = new WeakMap<CallerState, CallerLease>();
  /** Callers holding slots now, so a cooldown can drop them all. */
  readonly #holding = new Set<CallerState>();
  /** Largest batch: {@link MAX_BATCH}, and no more than the limit refills in one lease window. */
  readonly maxBatch: number;

  constructor(limit: RateLimit) {
    this.maxBatch = Math.min(MAX_BATCH, Math.floor((limit.count * LEASE_MS) / limit.periodMs));
  }

  #of(caller: CallerState, now: number): CallerLease {
    let lease = this.#leases.get(caller);
    if (lease === undefined) {
      lease = { slots: 0, until: 0, windowStart: now, count: 0, previous: 0 };
      this.#leases.set(caller, lease);
    }
    if (now - lease.windowStart >= LEASE_MS) {
      lease.previous = now - lease.windowStart < 2 * LEASE_MS ? lease.count : 0;
      lease.count = 0;
      lease.windowStart = now;
    }
    return lease;
  }

  /** Count one admission of `caller` (from a lease or not): what sizes its next batch. */
  admitted(caller: CallerState, now: number): void {
    this.#of(caller, now).count += 1;
  }

  /** Spend one of `caller`'s leased slots; false when it holds none (or its lease ended). */
  take(caller: CallerState, now: number): boolean {
    const lease = this.#leases.get(caller);
    if (lease === undefined || lease.slots === 0) return false;
    if (now >= lease.until) {
      this.#release(caller, lease);
      return false;
    }
    lease.slots -= 1;
    if (lease.slots === 0) this.#holding.delete(caller);
    return true;
  }

  /** The batch to ask for `caller` beyond its waiters: its recent admissions, bounded. */
  size(caller: CallerState, now: number): number {
    if (this.maxBatch === 0) return 0;
    const lease = this.#of(caller, now);
    return Math.min(this.maxBatch, Math.max(lease.previous, lease.count));
  }

  /** `slots` granted to `caller` beyond its waiters: spendable for {@link LEASE_MS} from `now`. */
  add(caller: CallerState, slots: number, now: number): void {
    if (slots <= 0) return;
    const lease = this.#of(caller, now);
    // Slots of an older lease are not carried past their own end: the new lease replaces them.
    lease.slots = slots;
    lease.until = now + LEASE_MS;
    this.#holding.add(caller);
  }

  /** Slots `caller` holds now (0 once its lease ended). */
  held(caller: CallerState, now: number): number {
    const lease = this.#leases.get(caller);
    return lease === undefined || now >= lease.until ? 0 : lease.slots;
  }

  /** A cooldown started: nothing leased may be sent into it. */
  dropAll(): void {
    for (const caller of this.#holding) {
      const lease = this.#leases.get(caller);
      if (lease !== undefined) lease.slots = 0;
    }
    this.#holding.clear();
  }

  #release(caller: CallerState, lease: CallerLease): void {
    lease.slots = 0;
    this.#holding.delete(caller);
  }
}
