import { describe, expect, it } from 'vitest';
import { retryAfterMs, wholeSecondsLeft } from './retry-after.js';

const NOW = Date.parse('2026-11-23T01:00:00Z');

describe('retryAfterMs', () => {
  it('reads delta seconds', () => {
    expect(retryAfterMs('120', NOW)).toBe(120_000);
    expect(retryAfterMs(' 7 ', NOW)).toBe(7_000);
    expect(retryAfterMs('0', NOW)).toBe(0);
  });

  it('reads an HTTP date against the answer Date, so a sidecar clock behind the API does not stretch it', () => {
    const date = 'Mon, 23 Nov 2026 02:00:00 GMT';
    const retryAt = 'Mon, 23 Nov 2026 02:00:30 GMT';
    // The sidecar's clock is an hour behind the API's: the wait is still 30 s, not 90 minutes.
    expect(retryAfterMs(retryAt, NOW, date)).toBe(30_000);
  });

  it('delta-seconds count from arrival: a Date behind, ahead or absent changes nothing', () => {
    const at = (offsetMs: number) => new Date(NOW + offsetMs).toUTCString();
    expect(retryAfterMs('2', NOW, at(0))).toBe(2_000);
    // Date has one-second resolution: an answer made 0.9 s before this second still waits 2 s.
    expect(retryAfterMs('2', NOW + 900, at(0))).toBe(2_000);
    expect(retryAfterMs('4', NOW, at(-60_000))).toBe(4_000);
    expect(retryAfterMs('4', NOW, at(30_000))).toBe(4_000);
    expect(retryAfterMs('4', NOW)).toBe(4_000);
    expect(retryAfterMs('120', NOW, 'garbage')).toBe(120_000);
  });

  it('what a cache held the answer for (Age) is taken off, whatever the form', () => {
    expect(retryAfterMs('120', NOW, undefined, '100')).toBe(20_000);
    expect(retryAfterMs('120', NOW, new Date(NOW - 60_000).toUTCString(), '100')).toBe(20_000);
    expect(retryAfterMs('120', NOW, undefined, '3600')).toBe(0);
    // A replayed stale 503: Date an hour old, Age 3600, Retry-After Date + 120 s.
    const date = 'Mon, 23 Nov 2026 00:00:00 GMT';
    const retryAt = 'Mon, 23 Nov 2026 00:02:00 GMT';
    expect(retryAfterMs(retryAt, NOW, date, '3600')).toBe(0);
    expect(retryAfterMs(retryAt, NOW, date, '30')).toBe(90_000);
    // Measured against the answer's Date, the HTTP-date names 120 s whatever the local clock says.
    expect(retryAfterMs(retryAt, NOW, date)).toBe(120_000);
    // An invalid Age is ignored.
    expect(retryAfterMs('120', NOW, undefined, '-5')).toBe(120_000);
  });

  it('reads an HTTP date against the local clock without a Date header', () => {
    expect(retryAfterMs('Mon, 23 Nov 2026 01:00:45 GMT', NOW)).toBe(45_000);
    expect(retryAfterMs('Mon, 23 Nov 2026 01:00:45 GMT', NOW, 'garbage')).toBe(45_000);
  });

  it('accepts the obsolete date forms of RFC 9110', () => {
    expect(retryAfterMs('Monday, 23-Nov-26 01:00:10 GMT', NOW)).toBe(10_000);
  });

  it('a date already past is 0', () => {
    expect(retryAfterMs('Sun, 22 Nov 2026 00:00:00 GMT', NOW)).toBe(0);
  });

  it('absent or invalid is undefined', () => {
    expect(retryAfterMs(undefined, NOW)).toBeUndefined();
    expect(retryAfterMs('', NOW)).toBeUndefined();
    expect(retryAfterMs('-5', NOW)).toBeUndefined();
    expect(retryAfterMs('1.5', NOW)).toBeUndefined();
    expect(retryAfterMs('soon', NOW)).toBeUndefined();
    expect(retryAfterMs('12 seconds', NOW)).toBeUndefined();
  });

  it('takes the first of repeated fields', () => {
    expect(retryAfterMs(['3', '9'], NOW)).toBe(3_000);
  });
});

describe('wholeSecondsLeft', () => {
  it('rounds up and is at least 1', () => {
    expect(wholeSecondsLeft(0)).toBe(1);
    expect(wholeSecondsLeft(1)).toBe(1);
    expect(wholeSecondsLeft(1000)).toBe(1);
    expect(wholeSecondsLeft(1001)).toBe(2);
    expect(wholeSecondsLeft(299_500)).toBe(300);
  });
});

describe("retryAfterMs: the token client's cases", () => {
  it('reads delta-seconds and HTTP-dates, never negative', () => {
    expect(retryAfterMs(undefined, 0)).toBeUndefined();
    expect(retryAfterMs(' 5 ', 0)).toBe(5000);
    expect(retryAfterMs('soon', 0)).toBeUndefined();
    expect(retryAfterMs('-3', 0)).toBeUndefined();
    expect(retryAfterMs('Thu, 01 Jan 1970 00:00:10 GMT', 4000)).toBe(6000);
    expect(retryAfterMs('Thu, 01 Jan 1970 00:00:10 GMT', 20_000)).toBe(0);
  });
});
