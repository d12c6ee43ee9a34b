/**
 * Many concurrent items that all expire after the same time (every upstream call's time to its
 * answer head, `upstream.timeoutMs`), served by one timer instead of a node timer each.
 *
 * Items expire in the order they were added, so a list in that order is also in expiry order:
 * adding appends, removing unlinks, and the timer, aimed at the oldest item's deadline, expires
 * from the front until it meets an item not yet due, then aims at the new front. An item removed
 * before its deadline (nearly every one) costs no timer work: the timer runs out at the old
 * front's deadline and re-aims. The links live on the items, so queuing allocates nothing; a
 * `setTimeout` per request allocated a Timeout and a closure and read libuv's clock twice
 * (docs/benchmarks.md, "Timers and observers").
 *
 * Deadlines are read from a monotonic clock (`performance.now()`), so a wall-clock step cannot
 * move them. An item never expires before its time; it expires as late as node's timer fires
 * (event-loop lag, once: each aim is computed afresh from the clock, so lag never accumulates).
 * The timer is unref'd and runs only while an item is queued.
 */
import { monotonicNow, type Clock, type MonotonicNow, type TimerHandle } from '../clock.js';

/** The links an item carries while queued. Owned by the queue: nothing else writes them. */
export interface Expiring {
  expiryAt: number;
  expiryPrev: Expiring | undefined;
  expiryNext: Expiring | undefined;
  expiryQueued: boolean;
}

export class ExpiryQueue<T extends Expiring> {
  readonly #clock: Pick<Clock, 'setTimeout'>;
  readonly #now: MonotonicNow;
  readonly #ms: number;
  readonly #onExpire: (item: T) => void;
  #head: T | undefined;
  #tail: T | undefined;
  #size = 0;
  #timer: TimerHandle | undefined;
  readonly #fire = (): void => this.#onTimer();

  constructor(
    clock: Pick<Clock, 'setTimeout'>,
    ms: number,
    onExpire: (item: T) => void,
    now: MonotonicNow = monotonicNow,
  ) {
    this.#clock = clock;
    this.#ms = ms;
    this.#onExpire = onExpire;
    this.#now = now;
  }

  /** Items queued now. */
  get size(): number {
    return this.#size;
  }

  add(item: T): void {
    if (item.expiryQueued) this.remove(item);
    item.expiryAt = this.#now() + this.#ms;
    item.expiryQueued = true;
    item.expiryNext = undefined;
    item.expiryPrev = this.#tail;
    if (this.#tail === undefined) this.#head = item;
    else this.#tail.expiryNext = item;
    this.#tail = item;
    this.#size++;
    if (this.#timer === undefined) this.#aim(this.#ms);
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
    // The timer is left to run out: it finds the new front (or nothing) and re-aims (or stops).
  }

  #aim(delayMs: number): void {
    // node runs a timer after whole milliseconds: never aim below the time still to go.
    this.#timer = this.#clock.setTimeout(this.#fire, Math.max(1, Math.ceil(delayMs)));
    this.#timer.unref?.();
  }

  #onTimer(): void {
    this.#timer = undefined;
    try {
      // Items added by an expiry are due `ms` from now: the loop stops at them.
      while (this.#head !== undefined && this.#head.expiryAt <= this.#now()) {
        const item = this.#head;
        this.remove(item);
        this.#onExpire(item);
      }
    } finally {
      if (this.#head !== undefined && this.#timer === undefined) {
        this.#aim(this.#head.expiryAt - this.#now());
      }
    }
  }
}
