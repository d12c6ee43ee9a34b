/**
 * Who gets the next rate-limit slot (docs/quota-guard.md "Fair share between callers"): the
 * requests waiting for one, in a FIFO per caller, and start-time fair queuing across callers.
 * Each caller has a virtual time that grows by 1/weight per admitted request and, when it starts
 * asking again, is brought up to the queue's own (no credit banked while idle); the next slot goes
 * to the waiting caller with the smallest key: its virtual time when `interactive`, one turn later
 * when `batch`. So a caller within its share is next at once, what one leaves unused goes to the
 * others, and a flooding caller of either priority never pushes another below
 * rate × weight ÷ (active weights).
 */
import type { Clock, TimerHandle } from '../../clock.js';
import type { Priority } from '../../config/types.js';

export type { CallerPolicy, Priority } from '../../config/types.js';

export interface Waiter {
  resolve(): void;
  reject(reason: unknown): void;
  caller: CallerState;
  enqueuedAt: number;
  timer: TimerHandle;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  /** Its deadline passed while a store decision was pending: settled when that decision is. */
  expired: boolean;
}

/** One caller's standing. `name` is what the store and the logs know it by. */
export class CallerState {
  readonly waiters = new Set<Waiter>();
  /** Virtual time: grows by 1/weight per admitted request. */
  vt = 0;
  /** When it last asked for a slot (admitted or not): active callers share the rate. */
  lastAsked = Number.NEGATIVE_INFINITY;

  constructor(
    readonly name: string,
    readonly weight: number,
    readonly priority: Priority,
  ) {}

  /** Its scheduling key while it waits: its virtual start, one turn later when `batch`. */
  key(): number {
    return this.priority === 'interactive' ? this.vt : this.vt + 1 / this.weight;
  }
}

export interface FairQueueOptions {
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  queueMs: number;
  /** A waiter's deadline passed. */
  onDeadline(waiter: Waiter): void;
  /** The queue became empty. */
  onEmpty(): void;
  /** Observed once per waiter granted a slot: seconds it waited, and its caller. */
  waited(seconds: number, caller: CallerState): void;
}

/** What a waiter whose client left rejects with: the caller's abort reason. */
function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('the client left while waiting for a slot');
}

export class FairQueue {
  /** Callers with at least one waiter. */
  readonly #backlogged = new Set<CallerState>();
  #size = 0;
  /** The queue's virtual time: the start of the last admission. */
  #v = 0;

  constructor(private readonly options: FairQueueOptions) {}

  get size(): number {
    return this.#size;
  }

  get backlogged(): ReadonlySet<CallerState> {
    return this.#backlogged;
  }

  has(waiter: Waiter): boolean {
    return waiter.caller.waiters.has(waiter);
  }

  *[Symbol.iterator](): IterableIterator<Waiter> {
    for (const caller of this.#backlogged) yield* caller.waiters;
  }

  /** A caller that starts asking again starts at the queue's virtual time: idle time banks nothing. */
  #wakeUp(caller: CallerState): void {
    if (caller.vt < this.#v) caller.vt = this.#v;
  }

  /** Count one admission of `caller` (granted from the queue, or at once). */
  charge(caller: CallerState): void {
    if (caller.waiters.size === 0) this.#wakeUp(caller);
    this.#v = caller.vt;
    caller.vt += 1 / caller.weight;
  }

  /** Resolves with a slot; rejects when the client leaves (`signal`) or the guard refuses it. */
  add(
    caller: CallerState,
    now: number,
    signal: AbortSignal | undefined,
    onAdded: () => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const { clock, queueMs } = this.options;
      const waiter: Waiter = {
        resolve,
        reject,
        caller,
        enqueuedAt: now,
        timer: clock.setTimeout(() => this.options.onDeadline(waiter), queueMs),
        signal,
        onAbort: undefined,
        expired: false,
      };
      if (signal !== undefined) {
        // The client left while waiting: its place goes to the next one at once.
        waiter.onAbort = () => this.settle(waiter, abortReason(waiter.signal));
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      if (caller.waiters.size === 0) this.#wakeUp(caller);
      caller.waiters.add(waiter);
      this.#backlogged.add(caller);
      this.#size += 1;
      onAdded();
    });
  }

  /** Remove a waiter and settle it: resolve (`reason` undefined) or reject. */
  settle(waiter: Waiter, reason?: unknown): void {
    const caller = waiter.caller;
    if (!caller.waiters.delete(waiter)) return;
    this.#size -= 1;
    if (caller.waiters.size === 0) this.#backlogged.delete(caller);
    this.options.clock.clearTimeout(waiter.timer);
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    if (reason === undefined) waiter.resolve();
    else waiter.reject(reason);
    if (this.#size === 0) this.options.onEmpty();
  }

  /** The caller whose waiter gets the next slot; undefined when nobody waits. */
  next(): CallerState | undefined {
    let best: CallerState | undefined;
    let bestKey = Infinity;
    for (const caller of this.#backlogged) {
      const key = caller.key();
      if (key < bestKey) {
        best = caller;
        bestKey = key;
      }
    }
    return best;
  }

  /** Hand `count` slots out in fair order. */
  grant(count: number, now: number): void {
    for (; count > 0; count -= 1) {
      const caller = this.next();
      if (caller === undefined) return;
      this.grantTo(caller, 1, now);
    }
  }

  /** Hand `count` slots to `caller`'s waiters, in arrival order (the fleet decided whose they are). */
  grantTo(caller: CallerState, count: number, now: number): void {
    for (const waiter of caller.waiters) {
      if (count <= 0) return;
      count -= 1;
      this.charge(caller);
      this.options.waited((now - waiter.enqueuedAt) / 1000, caller);
      this.settle(waiter);
    }
  }
}
