/** The keeper's one pending attempt, on vitest's fake timers driving the injected clock. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MAX_TIMER_DELAY_MS, systemClock } from '../clock.js';
import { AttemptTimer } from './attempt-timer.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('AttemptTimer', () => {
  it('fires once at its time, and keeps the time until the next arm or cancel', () => {
    const timer = new AttemptTimer(systemClock);
    const fire = vi.fn();
    timer.arm(T0 + 1_000, fire);
    expect(timer.at).toBe(T0 + 1_000);
    expect(timer.armedFor(T0 + 1_000)).toBe(true);
    expect(timer.armedFor(T0 + 999)).toBe(false);
    vi.advanceTimersByTime(999);
    expect(fire).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fire).toHaveBeenCalledOnce();
    // Fired: no timer is armed any more, but the due time stays for /status until the attempt.
    expect(timer.armedFor(T0 + 1_000)).toBe(false);
    expect(timer.at).toBe(T0 + 1_000);
    vi.advanceTimersByTime(10_000);
    expect(fire).toHaveBeenCalledOnce();
  });

  it('arming again replaces the pending attempt: only the newest fires', () => {
    const timer = new AttemptTimer(systemClock);
    const first = vi.fn();
    const second = vi.fn();
    timer.arm(T0 + 1_000, first);
    timer.arm(T0 + 3_000, second);
    vi.advanceTimersByTime(5_000);
    expect(first).not.toHaveBeenCalled();
    expect(second).toHaveBeenCalledOnce();
  });

  it('cancel: nothing pending, nothing fires', () => {
    const timer = new AttemptTimer(systemClock);
    const fire = vi.fn();
    timer.arm(T0 + 1_000, fire);
    timer.cancel();
    expect(timer.at).toBeUndefined();
    expect(timer.armedFor(T0 + 1_000)).toBe(false);
    vi.advanceTimersByTime(5_000);
    expect(fire).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a time past now fires at once; one beyond node’s longest delay is not clamped to 1 ms', () => {
    const timer = new AttemptTimer(systemClock);
    const late = vi.fn();
    timer.arm(T0 - 5_000, late);
    vi.advanceTimersByTime(0);
    expect(late).toHaveBeenCalledOnce();

    const far = vi.fn();
    const at = T0 + MAX_TIMER_DELAY_MS + 60_000;
    timer.arm(at, far);
    vi.advanceTimersByTime(MAX_TIMER_DELAY_MS);
    expect(far).not.toHaveBeenCalled();
    vi.advanceTimersByTime(60_000);
    expect(far).toHaveBeenCalledOnce();
  });
});
