/**
 * Time as a dependency (docs/design.md "Practices" 6): the keeper's schedule, backoff and token ages read this, so
 * tests drive them with fake timers or a hand-made clock.
 */
import { performance } from 'node:perf_hooks';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/**
 * Milliseconds from an arbitrary origin, never going back: for deadlines and idle times, which a
 * wall-clock step must not move. Tests pass a fake one.
 */
export type MonotonicNow = () => number;

/** The real monotonic clock (`performance.now()`). */
export const monotonicNow: MonotonicNow = () => performance.now();

export interface TimerHandle {
  unref?(): unknown;
}

/** The real clock. Resolves `setTimeout` at call time so vitest's fake timers also drive it. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Node's largest timer delay (2^31−1 ms, 24.8 days); a longer one is clamped to 1 ms by Node. */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/** A timer of any length, cancellable. */
export interface LongTimer {
  cancel(): void;
}

/**
 * Calls `fn` once after `ms` (any length, e.g. a token lifetime of years): delays beyond Node's
 * maximum are re-armed in steps of at most {@link MAX_TIMER_DELAY_MS} instead of being clamped to
 * 1 ms. Every step is unref'd: a timer alone never keeps the process alive.
 */
export function setLongTimeout(clock: Clock, fn: () => void, ms: number): LongTimer {
  const dueAt = clock.now() + Math.max(0, ms);
  let handle: TimerHandle | undefined;
  let cancelled = false;
  const arm = (remaining: number): void => {
    const last = remaining <= MAX_TIMER_DELAY_MS;
    handle = clock.setTimeout(
      () => {
        handle = undefined;
        if (cancelled) return;
        if (last) fn();
        else arm(Math.max(0, dueAt - clock.now()));
      },
      last ? remaining : MAX_TIMER_DELAY_MS,
    );
    handle.unref?.();
  };
  arm(Math.max(0, ms));
  return {
    cancel() {
      cancelled = true;
      if (handle !== undefined) clock.clearTimeout(handle);
      handle = undefined;
    },
  };
}

/**
 * `work`, or a rejection once `ms` have passed (`<what> did not finish within <ms> ms`); the work
 * itself is left to finish unobserved. For work whose own limits a hung mount or peer may defeat.
 */
export function withDeadline<T>(
  work: Promise<T>,
  clock: Clock,
  ms: number,
  what: string,
): Promise<T> {
  let timer: TimerHandle | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = clock.setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
    timer.unref?.();
  });
  return Promise.race([work, deadline]).finally(() => {
    if (timer !== undefined) clock.clearTimeout(timer);
  });
}
