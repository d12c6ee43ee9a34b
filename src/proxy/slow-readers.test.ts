import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import { MIN_READ_GRACE_MS, SlowReaders, type Stalled } from './slow-readers.js';

function reader(written = 0, unsent = 0): Stalled & { cut: number; written: number } {
  return {
    written,
    unsent,
    headAt: Date.now(),
    cut: 0,
    tooSlow() {
      this.cut += 1;
    },
  };
}

function readers(maxStalled = 4, maxStalledUpstream = 2, minBytesPerSecond = 500) {
  return new SlowReaders({ maxStalled, maxStalledUpstream, minBytesPerSecond, clock: systemClock });
}

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-11-27T20:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('SlowReaders', () => {
  it('holds at most half the slots: the one over is refused, one that reads again frees its place', () => {
    const watch = readers(2, 2);
    const [a, b, c] = [reader(), reader(), reader()];
    expect(watch.stall(a, false)).toBe(true);
    expect(watch.stall(b, false)).toBe(true);
    expect(watch.stall(c, false)).toBe(false);
    // Stalling again while stalled takes nothing more.
    expect(watch.stall(a, false)).toBe(true);
    watch.flowing(a);
    expect(watch.stall(c, false)).toBe(true);
    expect(watch.stalled).toBe(2);
  });

  it('holds at most half the upstream connections; an ended upstream answer gives its place back', () => {
    const watch = readers(10, 1);
    const [a, b, c] = [reader(), reader(), reader()];
    expect(watch.stall(a, true)).toBe(true);
    expect(watch.stall(b, true)).toBe(false);
    // Not holding a connection (its upstream answer ended): only the slot cap applies.
    expect(watch.stall(c, false)).toBe(true);
    watch.upstreamEnded(a);
    expect(watch.stalledUpstream).toBe(0);
    expect(watch.stall(b, true)).toBe(true);
    watch.flowing(b);
    watch.flowing(b);
    expect(watch.stalledUpstream).toBe(0);
    expect(watch.stalled).toBe(2);
  });

  it('a reader below the minimum average rate is cut once its first 10 s passed, not before', () => {
    const watch = readers();
    // 4,000 bytes taken in 10 s is 400 B/s: below 500 B/s.
    const slow = reader(20_000, 16_000);
    // 6,000 bytes in 10 s: 600 B/s.
    const fine = reader(6_000, 0);
    watch.stall(slow, true);
    watch.stall(fine, true);
    vi.advanceTimersByTime(MIN_READ_GRACE_MS - 1_000);
    expect(slow.cut).toBe(0);
    vi.advanceTimersByTime(1_000);
    expect(slow.cut).toBe(1);
    expect(fine.cut).toBe(0);
    expect(watch.stalled).toBe(1);
    expect(watch.stalledUpstream).toBe(1);
    // At 12 s, 6,000 bytes is 500 B/s; at 13 s below it.
    vi.advanceTimersByTime(2_000);
    expect(fine.cut).toBe(0);
    vi.advanceTimersByTime(1_000);
    expect(fine.cut).toBe(1);
    expect(watch.stalled).toBe(0);
    // Nothing stalled: the sweep's timer is not armed again.
    expect(vi.getTimerCount()).toBe(0);
  });

  it('without a minimum rate only the caps apply (no timer)', () => {
    const watch = readers(4, 2, 0);
    const r = reader(0, 0);
    watch.stall(r, true);
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(60_000);
    expect(r.cut).toBe(0);
  });
});
