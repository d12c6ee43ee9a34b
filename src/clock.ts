/**
 * Time as a dependency (docs/design.md "Practices" 6): the keeper's schedule, backoff and token ages read this, so
 * tests drive them with fake timers or a hand-made clock.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export interface TimerHandle {
  unref?(): unknown;
}

/** The real clock. Resolves `setTimeout` at call time so vitest's fake timers also drive it. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};
