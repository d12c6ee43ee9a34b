/** The keeper's failure state: backoff step, the time before which no request starts, the last error. */
import { describe, expect, it } from 'vitest';
import { TokenEndpointError } from '../errors.js';
import { Failures } from './failures.js';
import { RECOVERY_CAP_MS, retryTime } from './schedule.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const HOUR = 3_600_000;

function serverError(retryAfterMs?: number): TokenEndpointError {
  return new TokenEndpointError('server', 'token endpoint answered 503', {
    status: 503,
    ...(retryAfterMs !== undefined && { retryAfterMs }),
  });
}

describe('Failures', () => {
  it('records the step, its jitter, Retry-After, the retry time and the last error', () => {
    const failures = new Failures(() => 0.5);
    failures.record(serverError(30_000), T0, T0 + HOUR);
    expect(failures.consecutive).toBe(1);
    expect(failures.last).toEqual({ failures: 1, random: 0.5, retryAfterMs: 30_000 });
    expect(failures.notBefore).toBe(retryTime(T0, failures.last!, T0 + HOUR));
    // A valid token is held for an hour: Retry-After decides, not the recovery cap.
    expect(failures.notBefore).toBe(T0 + 30_000);
    expect(failures.lastError).toEqual({
      kind: 'server',
      message: 'token endpoint answered 503',
      at: '2030-01-01T00:00:00.000Z',
    });
  });

  it('each failure is one step further; a non-endpoint error carries no Retry-After', () => {
    const failures = new Failures(() => 1);
    failures.record(serverError(), T0, T0 + HOUR);
    failures.record(new Error('socket hang up'), T0 + 1_000, T0 + HOUR);
    failures.record(new Error('socket hang up'), T0 + 3_000, T0 + HOUR);
    expect(failures.consecutive).toBe(3);
    expect(failures.last).toEqual({ failures: 3, random: 1, retryAfterMs: undefined });
    // random 1: the full ceiling of step 3, 4 s.
    expect(failures.notBefore).toBe(T0 + 3_000 + 4_000);
    expect(failures.lastError?.kind).toBe('internal');
  });

  it('a success clears the step and the wait, and keeps the last error for /status', () => {
    const failures = new Failures(() => 0.5);
    failures.record(serverError(60_000), T0, T0 + HOUR);
    failures.succeeded();
    expect(failures).toMatchObject({ consecutive: 0, last: undefined, notBefore: 0 });
    expect(failures.lastError?.kind).toBe('server');
    failures.record(serverError(), T0 + 1_000, T0 + HOUR);
    expect(failures.last?.failures).toBe(1);
  });

  it('new credentials: the wait ends and the backoff starts over, the count goes on', () => {
    const failures = new Failures(() => 0.5);
    expect(failures.credentialsChanged()).toBe(false);
    failures.record(serverError(60_000), T0, T0 + HOUR);
    failures.record(serverError(60_000), T0 + 60_000, T0 + HOUR);
    expect(failures.credentialsChanged()).toBe(true);
    expect(failures.notBefore).toBe(0);
    expect(failures.last).toBeUndefined();
    failures.record(serverError(), T0 + 61_000, T0 + HOUR);
    expect(failures.consecutive).toBe(3);
    expect(failures.last?.failures).toBe(1);
  });

  it('the token dropped: a long Retry-After wait is pulled in to the recovery cap', () => {
    const failures = new Failures(() => 1);
    failures.record(serverError(HOUR), T0, T0 + 2 * HOUR);
    expect(failures.notBefore).toBe(T0 + HOUR);
    failures.tokenDropped(T0 + 10_000);
    expect(failures.notBefore).toBe(T0 + 10_000 + RECOVERY_CAP_MS);
    // Never pushed out: a shorter wait stays.
    failures.tokenDropped(T0 + 20_000);
    expect(failures.notBefore).toBe(T0 + 10_000 + RECOVERY_CAP_MS);
  });

  it('the token dropped: pulled in to a configured recovery cap', () => {
    const failures = new Failures(() => 1, 2_000);
    failures.record(serverError(HOUR), T0, T0 + 2 * HOUR);
    failures.tokenDropped(T0 + 10_000);
    expect(failures.notBefore).toBe(T0 + 12_000);
    failures.record(serverError(HOUR), T0 + 12_000, undefined);
    expect(failures.notBefore).toBe(T0 + 14_000);
  });

  it('the token dropped with no failure pending changes nothing', () => {
    const failures = new Failures(() => 1);
    failures.tokenDropped(T0);
    expect(failures.notBefore).toBe(0);
  });
});
