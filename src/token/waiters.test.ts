/** Callers waiting for a token, on vitest's fake timers driving the injected clock. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import { TokenWaiters } from './waiters.js';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2030-01-01T00:00:00.000Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

type State<T> = { value?: T; error?: unknown } | 'pending';

/** Follows `promise` from its creation (so a rejection is never unhandled); `()` reads its state. */
function track<T>(promise: Promise<T>): () => State<T> {
  let state: State<T> = 'pending';
  promise.then(
    (value) => (state = { value }),
    (error: unknown) => (state = { error }),
  );
  return () => state;
}

describe('TokenWaiters', () => {
  it('every waiter gets the token handed out; their timers are gone', async () => {
    const waiters = new TokenWaiters(systemClock);
    const a = waiters.wait(5_000, () => new Error('timed out'));
    const b = waiters.wait(1_000, () => new Error('timed out'));
    const ready = waiters.whenReady();
    waiters.hand('access-1');
    await expect(a).resolves.toBe('access-1');
    await expect(b).resolves.toBe('access-1');
    await expect(ready).resolves.toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a waiter gives up after its waitMs with the error made then, not before', async () => {
    const waiters = new TokenWaiters(systemClock);
    let made = 0;
    const wait = track(waiters.wait(5_000, () => new Error(`unavailable ${++made}`)));
    await vi.advanceTimersByTimeAsync(4_999);
    expect(wait()).toBe('pending');
    expect(made).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(wait()).toEqual({ error: new Error('unavailable 1') });
    // Gone from the set: a later token is not handed to it (a settled promise would ignore it,
    // but the error is made once).
    waiters.hand('access-1');
    expect(made).toBe(1);
  });

  it('a token handed out after one waiter timed out reaches only the one still waiting', async () => {
    const waiters = new TokenWaiters(systemClock);
    const short = track(waiters.wait(1_000, () => new Error('short')));
    const long = track(waiters.wait(10_000, () => new Error('long')));
    await vi.advanceTimersByTimeAsync(2_000);
    waiters.hand('access-1');
    await vi.advanceTimersByTimeAsync(0);
    expect(short()).toEqual({ error: new Error('short') });
    expect(long()).toEqual({ value: 'access-1' });
  });

  it('refuse: waiters and whenReady are rejected with their own errors, timers cleared', async () => {
    const waiters = new TokenWaiters(systemClock);
    const wait = waiters.wait(5_000, () => new Error('timed out'));
    const ready = waiters.whenReady();
    waiters.refuse(new Error('shutting down'), new Error('stopped before a token'));
    await expect(wait).rejects.toThrow('shutting down');
    await expect(ready).rejects.toThrow('stopped before a token');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('whenReady waits for a token, not for time', async () => {
    const waiters = new TokenWaiters(systemClock);
    const ready = track(waiters.whenReady());
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(ready()).toBe('pending');
    waiters.hand('access-1');
    await vi.advanceTimersByTimeAsync(0);
    expect(ready()).toEqual({ value: undefined });
  });
});
