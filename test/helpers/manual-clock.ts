/** A hand-driven {@link Clock}: time moves only when a test calls `advance`, which runs the timers due. */
import type { Clock, TimerHandle } from '../../src/clock.js';

export interface ManualClock extends Clock {
  /** Move time forward by `ms`, running every timer due by then in order of its due time. */
  advance(ms: number): void;
  /** Timers set and neither fired nor cleared. */
  pending(): number;
}

export function manualClock(start = Date.UTC(2026, 0, 1)): ManualClock {
  let now = start;
  const timers = new Map<TimerHandle, { at: number; fn: () => void }>();
  return {
    now: () => now,
    setTimeout(fn, ms) {
      const handle: TimerHandle = {};
      timers.set(handle, { at: now + Math.max(0, ms), fn });
      return handle;
    },
    clearTimeout(handle) {
      timers.delete(handle);
    },
    advance(ms) {
      const until = now + ms;
      for (;;) {
        const due = [...timers]
          .filter(([, t]) => t.at <= until)
          .sort((a, b) => a[1].at - b[1].at)[0];
        if (due === undefined) break;
        timers.delete(due[0]);
        now = due[1].at;
        due[1].fn();
      }
      now = until;
    },
    pending: () => timers.size,
  };
}
