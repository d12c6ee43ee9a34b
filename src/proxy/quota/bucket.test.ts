import { describe, expect, it } from 'vitest';
import { TokenBucket } from './bucket.js';

describe('TokenBucket', () => {
  it('starts full and never banks more than N', () => {
    const bucket = new TokenBucket({ count: 3, periodMs: 3_000 }, 0);
    expect(bucket.take(5, 0)).toBe(3);
    expect(bucket.take(1, 0)).toBe(0);
    expect(bucket.available(1_000_000)).toBe(3);
  });

  it('refills one slot every period / N', () => {
    const bucket = new TokenBucket({ count: 4, periodMs: 1_000 }, 0);
    expect(bucket.take(4, 0)).toBe(4);
    expect(bucket.msUntil(1, 0)).toBe(250);
    expect(bucket.take(1, 249)).toBe(0);
    expect(bucket.take(1, 250)).toBe(1);
    expect(bucket.msUntil(3, 250)).toBe(750);
    expect(bucket.take(3, 1_000)).toBe(3);
  });

  it('counts N over any window of one period (plus the initial burst)', () => {
    const bucket = new TokenBucket({ count: 10, periodMs: 60_000 }, 0);
    let taken = 0;
    for (let t = 0; t <= 60_000; t += 5) taken += bucket.take(1, t);
    // 10 at once, then one every 6 s over 60 s
    expect(taken).toBe(20);
  });

  it('500 an hour: one slot every 7.2 s', () => {
    const bucket = new TokenBucket({ count: 500, periodMs: 3_600_000 }, 0);
    expect(bucket.intervalMs).toBe(7_200);
    bucket.take(500, 0);
    expect(bucket.msUntil(1, 0)).toBe(7_200);
  });
});
