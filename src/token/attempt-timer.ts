/**
 * The keeper's one pending token attempt (renewal or retry): a single timer and the time it is due,
 * which `/status` reports as `nextRenewalAt` and a waiting caller gets as its `Retry-After`.
 */
import { setLongTimeout, type Clock, type LongTimer } from '../clock.js';

export class AttemptTimer {
  #timer: LongTimer | undefined;
  /** When the pending attempt is due; kept after the timer fired until the attempt starts. */
  #at: number | undefined;

  constructor(private readonly clock: Clock) {}

  /** When the next attempt is due (ms since the epoch), or undefined when none is scheduled. */
  get at(): number | undefined {
    return this.#at;
  }

  /** A timer is armed for `at` and has not fired yet. */
  armedFor(at: number): boolean {
    return this.#timer !== undefined && this.#at === at;
  }

  /** Replaces any pending attempt with `fire` at `at`. */
  arm(at: number, fire: () => void): void {
    this.#timer?.cancel();
    this.#at = at;
    this.#timer = setLongTimeout(
      this.clock,
      () => {
        this.#timer = undefined;
        fire();
      },
      at - this.clock.now(),
    );
  }

  /** No attempt pending. */
  cancel(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#at = undefined;
  }
}
