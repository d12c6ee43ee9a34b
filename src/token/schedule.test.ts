import { describe, expect, it } from 'vitest';
import { FIELDS } from '../config/schema.js';
import {
  BACKOFF_CAP_MS,
  MAX_RETRY_AFTER_MS,
  RECOVERY_CAP_MS,
  backoffDelayMs,
  retryTime,
  renewalLeadSeconds,
  renewalTime,
  secondsUntil,
} from './schedule.js';

const defaults = { refreshMarginSeconds: 60, refreshFraction: 0.2 };

describe('renewalLeadSeconds', () => {
  it('uses the fraction when it gives the larger lead (1799 s lifetime)', () => {
    expect(renewalLeadSeconds(1799, defaults, 0)).toBeCloseTo(359.8);
  });

  it('uses the margin when it gives the larger lead (200 s lifetime)', () => {
    expect(renewalLeadSeconds(200, defaults, 0)).toBe(60);
  });

  it('never renews earlier than half the lifetime (3 s lifetime, 60 s margin)', () => {
    expect(renewalLeadSeconds(3, defaults, 0)).toBe(1.5);
    expect(renewalLeadSeconds(3, defaults, 0.999)).toBe(1.5);
  });

  it('adds a jitter of at most 10% of the lead', () => {
    expect(renewalLeadSeconds(1000, defaults, 0)).toBe(200);
    const nearlyFull = renewalLeadSeconds(1000, defaults, 0.999999);
    expect(nearlyFull).toBeGreaterThan(219.99);
    expect(nearlyFull).toBeLessThan(220);
  });

  it('caps the jittered lead at half the lifetime', () => {
    // lead 60 s, jittered up to 66 s, but a 125 s lifetime allows at most 62.5 s.
    expect(renewalLeadSeconds(125, defaults, 0.999)).toBe(62.5);
    expect(renewalLeadSeconds(125, defaults, 0.1)).toBeCloseTo(60.6);
  });
});

describe('renewalTime', () => {
  it('counts from the moment the request was sent', () => {
    const sentAt = 1_000_000;
    expect(renewalTime(sentAt, 1799, defaults, 0)).toBeCloseTo(sentAt + 1_439_200);
    expect(renewalTime(sentAt, 3, defaults, 0.5)).toBe(sentAt + 1_500);
  });
});

describe('backoffDelayMs', () => {
  it('grows by doubling with random ≈ 1', () => {
    const r = 0.999999;
    const delays = [1, 2, 3, 4, 5, 6].map((n) => backoffDelayMs(n, r, undefined));
    expect(delays.map((d) => Math.round(d / 1000))).toEqual([1, 2, 4, 8, 16, 32]);
  });

  it('is capped at 60 s', () => {
    expect(backoffDelayMs(7, 1, undefined)).toBe(BACKOFF_CAP_MS);
    expect(backoffDelayMs(50, 1, undefined)).toBe(BACKOFF_CAP_MS);
    expect(backoffDelayMs(5000, 1, undefined)).toBe(BACKOFF_CAP_MS);
  });

  it('is full jitter: random = 0 gives no delay, random = 0.5 half the ceiling', () => {
    expect(backoffDelayMs(3, 0, undefined)).toBe(0);
    expect(backoffDelayMs(3, 0.5, undefined)).toBe(2_000);
  });

  it('waits at least Retry-After', () => {
    expect(backoffDelayMs(1, 0.5, 30_000)).toBe(30_000);
    expect(backoffDelayMs(8, 1, 5_000)).toBe(BACKOFF_CAP_MS);
    expect(backoffDelayMs(1, 0, 120_000)).toBe(120_000);
  });
});

describe('backoffDelayMs while recovering (no valid token held)', () => {
  const cap = RECOVERY_CAP_MS;

  it('is full jitter over 1, 2, 4, then 8 s, whatever the step', () => {
    const delays = [1, 2, 3, 4, 5, 20, 5000].map((n) => backoffDelayMs(n, 1, undefined, cap));
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 8_000, 8_000, 8_000]);
    expect(backoffDelayMs(20, 0.5, undefined, cap)).toBe(4_000);
  });

  it('honours Retry-After up to 8 s only', () => {
    expect(backoffDelayMs(1, 0, 5_000, cap)).toBe(5_000);
    expect(backoffDelayMs(1, 0, 3_000_000_000, cap)).toBe(RECOVERY_CAP_MS);
    expect(backoffDelayMs(1, 0, 3_000_000_000)).toBe(MAX_RETRY_AFTER_MS);
  });

  it('a configured cap bounds both the steps and Retry-After', () => {
    const delays = [1, 2, 3, 20].map((n) => backoffDelayMs(n, 1, undefined, 2_000));
    expect(delays).toEqual([1_000, 2_000, 2_000, 2_000]);
    expect(backoffDelayMs(1, 0, 3_000_000_000, 2_000)).toBe(2_000);
    const longer = [4, 5, 6, 7].map((n) => backoffDelayMs(n, 1, undefined, 60_000));
    expect(longer).toEqual([8_000, 16_000, 32_000, 60_000]);
  });

  it('is the default of token.recoveryBackoffCapMs', () => {
    expect(FIELDS['token.recoveryBackoffCapMs'].default).toBe(RECOVERY_CAP_MS);
  });
});

describe('retryTime', () => {
  const now = 1_000_000;
  const failure = (failures: number, retryAfterMs?: number) => ({
    failures,
    random: 1,
    retryAfterMs,
  });

  it('with no valid token: the recovery delay, at most 8 s', () => {
    expect(retryTime(now, failure(20), undefined)).toBe(now + 8_000);
    expect(retryTime(now, failure(20), now - 1)).toBe(now + 8_000);
    expect(retryTime(now, failure(1, 3_000_000_000), undefined)).toBe(now + 8_000);
    expect(retryTime(now, failure(2), undefined)).toBe(now + 2_000);
  });

  it('with a valid token: the backoff or Retry-After, but never later than 8 s past its expiry', () => {
    expect(retryTime(now, failure(20), now + 3_600_000)).toBe(now + BACKOFF_CAP_MS);
    expect(retryTime(now, failure(1, 3_000_000), now + 3_600_000)).toBe(now + 3_000_000);
    expect(retryTime(now, failure(1, 3_000_000), now + 100_000)).toBe(now + 108_000);
    expect(retryTime(now, failure(20), now + 10_000)).toBe(now + 18_000);
  });

  it('with a configured recovery cap: that cap instead of 8 s, the backoff while valid unchanged', () => {
    expect(retryTime(now, failure(20), undefined, 2_000)).toBe(now + 2_000);
    expect(retryTime(now, failure(1, 3_000_000), now + 100_000, 30_000)).toBe(now + 130_000);
    expect(retryTime(now, failure(20), now + 3_600_000, 30_000)).toBe(now + BACKOFF_CAP_MS);
  });
});

describe('secondsUntil', () => {
  it('rounds up to whole seconds, at least 1', () => {
    expect(secondsUntil(10_001, 0)).toBe(11);
    expect(secondsUntil(10_000, 0)).toBe(10);
    expect(secondsUntil(100, 0)).toBe(1);
    expect(secondsUntil(0, 5_000)).toBe(1);
  });
});
