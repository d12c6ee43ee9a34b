/** Callers waiting for a token (up to `token.waitMs` each) and for the first one (`whenReady`). */
import { setLongTimeout, type Clock, type LongTimer } from '../clock.js';

interface Waiter {
  resolve(token: string): void;
  reject(error: Error): void;
  timer: LongTimer | undefined;
}

export class TokenWaiters {
  readonly #waiters = new Set<Waiter>();
  readonly #ready: { resolve(): void; reject(error: Error): void }[] = [];

  constructor(private readonly clock: Clock) {}

  /** Resolves with the next token handed out, or rejects with `timedOut()` after `waitMs`. */
  wait(waitMs: number, timedOut: () => Error): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, timer: undefined };
      waiter.timer = setLongTimeout(
        this.clock,
        () => {
          this.#waiters.delete(waiter);
          reject(timedOut());
        },
        waitMs,
      );
      this.#waiters.add(waiter);
    });
  }

  whenReady(): Promise<void> {
    return new Promise<void>((resolve, reject) => this.#ready.push({ resolve, reject }));
  }

  /** Every waiter gets `token`. */
  hand(token: string): void {
    for (const waiter of this.#waiters) {
      this.#settle(waiter);
      waiter.resolve(token);
    }
    for (const waiter of this.#ready.splice(0)) waiter.resolve();
  }

  /** Every waiter is refused (the keeper stopped). */
  refuse(waiting: Error, ready: Error): void {
    for (const waiter of this.#waiters) {
      this.#settle(waiter);
      waiter.reject(waiting);
    }
    for (const waiter of this.#ready.splice(0)) waiter.reject(ready);
  }

  #settle(waiter: Waiter): void {
    waiter.timer?.cancel();
    this.#waiters.delete(waiter);
  }
}
