/**
 * Many concurrent items that all expire after the same time (every upstream call's time to its
 * answer head, `upstream.timeoutMs`), served by one ticking timer instead of a node timer each.
 *
 * Items expire in the order they were added, so a list in that order is also in expiry order:
 * adding appends, removing unlinks, and a tick expires from the front until it meets an item not
 * yet due. The links live on the items themselves, so queuing allocates nothing; a `setTimeout`
 * per request allocated a Timeout and a closure and read libuv's clock twice (docs/benchmarks.md,
 * "Eighth pass").
 *
 * Time is counted in ticks of the queue's own timer, never read from a clock: an item added
 * between ticks T and T+1 expires at tick T+K, so it never expires early (node's timers never
 * fire early) and a wall-clock step cannot move it. It expires late by less than two ticks: a
 * tick is a twentieth of the time, and at most {@link MAX_TICK_MS}. The timer runs only while
 * an item is queued and is unref'd: it never keeps the process alive.
 */
import type { Clock, TimerHandle } from '../clock.js';

/** The longest tick: an item expires at most twice this late. */
export const MAX_TICK_MS = 250;
/** Ticks per expiry time (the lateness is below two of them). */
const TICKS_PER_PERIOD = 20;

/** The links an item carries while queued. Owned by the queue: nothing else writes them. */
export interface Expiring {
  expiryTick: number;
  expiryPrev: Expiring | undefined;
  expiryNext: Expiring | undefined;
  expiryQueued: boolean;
}

export class ExpiryQueue<T extends Expiring> {
  readonly #clock: Pick<Clock, 'setTimeout'>;
  readonly #onExpire: (item: T) => void;
  readonly #tickMs: number;
  /** Ticks from the one after an item's addition to its expiry. */
  readonly #ticksToExpire: number;
  #ticks = 0;
  #head: T | undefined;
  #tail: T | undefined;
  #size = 0;
  #timer: TimerHandle | undefined;
  readonly #tick = (): void => this.#onTick();

  constructor(clock: Pick<Clock, 'setTimeout'>, ms: number, onExpire: (item: T) => void) {
    this.#clock = clock;
    this.#onExpire = onExpire;
    this.#tickMs = Math.max(1, Math.min(MAX_TICK_MS, Math.ceil(ms / TICKS_PER_PERIOD)));
    // Added between ticks T and T+1, expired at tick T+K: at least (K−1) ticks later, which is
    // at least `ms`; at most K ticks later, less than `ms` + 2 ticks.
    this.#ticksToExpire = Math.ceil(ms / this.#tickMs) + 1;
  }

  /** Items queued now. */
  get size(): number {
    return this.#size;
  }

  add(item: T): void {
    if (item.expiryQueued) this.remove(item);
    item.expiryTick = this.#ticks + this.#ticksToExpire;
    item.expiryQueued = true;
    item.expiryNext = undefined;
    item.expiryPrev = this.#tail;
    if (this.#tail === undefined) this.#head = item;
    else this.#tail.expiryNext = item;
    this.#tail = item;
    this.#size++;
    if (this.#timer === undefined) this.#arm();
  }

  /** Takes the item out; nothing happens if it is not queued (expired or removed already). */
  remove(item: T): void {
    if (!item.expiryQueued) return;
    item.expiryQueued = false;
    const prev = item.expiryPrev as T | undefined;
    const next = item.expiryNext as T | undefined;
    if (prev === undefined) this.#head = next;
    else prev.expiryNext = next;
    if (next === undefined) this.#tail = prev;
    else next.expiryPrev = prev;
    item.expiryPrev = undefined;
    item.expiryNext = undefined;
    this.#size--;
    // The timer is left to run out: the next tick finds the queue empty and stops.
  }

  #arm(): void {
    this.#timer = this.#clock.setTimeout(this.#tick, this.#tickMs);
    this.#timer.unref?.();
  }

  #onTick(): void {
    this.#timer = undefined;
    this.#ticks++;
    try {
      // Items added by an expiry are due later than this tick: the loop stops at them.
      while (this.#head !== undefined && this.#head.expiryTick <= this.#ticks) {
        const item = this.#head;
        this.remove(item);
        this.#onExpire(item);
      }
    } finally {
      if (this.#head !== undefined && this.#timer === undefined) this.#arm();
    }
  }
}
