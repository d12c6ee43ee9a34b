import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MAX_TIMER_DELAY_MS, setLongTimeout, systemClock } from './clock.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('setLongTimeout', () => {
  it('fires once, on time, after 40 days (past 2^31−1 ms), re-armed in steps', async () => {
    const fn = vi.fn();
    const days40 = 40 * 86_400_000;
    setLongTimeout(systemClock, fn, days40);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(MAX_TIMER_DELAY_MS);
    expect(fn).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(days40 - MAX_TIMER_DELAY_MS - 1);
    expect(fn).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(fn).toHaveBeenCalledOnce();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a short delay is one plain timer; cancel stops it at any step', async () => {
    const short = vi.fn();
    setLongTimeout(systemClock, short, 10);
    await vi.advanceTimersByTimeAsync(10);
    expect(short).toHaveBeenCalledOnce();

    const long = vi.fn();
    const timer = setLongTimeout(systemClock, long, 3 * MAX_TIMER_DELAY_MS);
    await vi.advanceTimersByTimeAsync(MAX_TIMER_DELAY_MS + 5);
    timer.cancel();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(3 * MAX_TIMER_DELAY_MS);
    expect(long).not.toHaveBeenCalled();
  });
});
