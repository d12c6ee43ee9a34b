/**
 * The requests waiting for a rate-limit slot: FIFO (a Set keeps insertion order and lets a waiter
 * that leaves go in O(1)), each with its deadline (`upstream.queueMs`) and its client's signal.
 */
import type { Clock, TimerHandle } from '../../clock.js';

export interface Waiter {
  resolve(): void;
  reject(reason: unknown): void;
  enqueuedAt: number;
  timer: TimerHandle;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  /** Its deadline passed while a store decision was pending: settled when that decision is. */
  expired: boolean;
}

export interface WaitQueueOptions {
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  queueMs: number;
  /** A waiter's deadline passed. */
  onDeadline(waiter: Waiter): void;
  /** The queue became empty. */
  onEmpty(): void;
  /** Observed once per waiter granted a slot: seconds it waited. */
  waited(seconds: number): void;
}

/** What a waiter whose client left rejects with: the caller's abort reason. */
function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('the client left while waiting for a slot');
}

export class WaitQueue {
  readonly #waiters = new Set<Waiter>();

  constructor(private readonly options: WaitQueueOptions) {}

  get size(): number {
    return this.#waiters.size;
  }

  has(waiter: Waiter): boolean {
    return this.#waiters.has(waiter);
  }

  [Symbol.iterator](): IterableIterator<Waiter> {
    return this.#waiters.values();
  }

  /** Resolves with a slot; rejects when the client leaves (`signal`) or the guard refuses it. */
  add(now: number, signal: AbortSignal | undefined, onAdded: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const { clock, queueMs } = this.options;
      const waiter: Waiter = {
        resolve,
        reject,
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
      this.#waiters.add(waiter);
      onAdded();
    });
  }

  /** Remove a waiter and settle it: resolve (`reason` undefined) or reject. */
  settle(waiter: Waiter, reason?: unknown): void {
    if (!this.#waiters.delete(waiter)) return;
    this.options.clock.clearTimeout(waiter.timer);
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    if (reason === undefined) waiter.resolve();
    else waiter.reject(reason);
    if (this.#waiters.size === 0) this.options.onEmpty();
  }

  rejectAll(reason: unknown): void {
    for (const waiter of this.#waiters) this.settle(waiter, reason);
  }

  /** Hand `count` slots to the head of the queue, in order. */
  grant(count: number, now: number): void {
    for (const waiter of this.#waiters) {
      if (count <= 0) break;
      count -= 1;
      this.options.waited((now - waiter.enqueuedAt) / 1000);
      this.settle(waiter);
    }
  }
}
