/**
 * The watch on the shared store while a retry waits (docs/token-store.md "How it works", a process in backoff),
 * on vitest's fake timers with a hand-made coordinator: when it looks, what it adopts, and when it
 * stops looking.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import type { SharedTokenSet } from '../fleet/token-sets.js';
import { createLogger } from '../telemetry/logger.js';
import type { Adopted, HeldRef, TokenCoordinator } from './coordination.js';
import type { FailureRecord } from './failures.js';
import { LEASE_POLL_MS } from './shared.js';
import { StoreWatch } from './store-watch.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const failure: FailureRecord = { failures: 1, random: 0.5, retryAfterMs: undefined };
const set: SharedTokenSet = {
  accessToken: 'access-fleet',
  refreshToken: undefined,
  sentAt: T0,
  lifetimeSeconds: 600,
  grant: 'client_credentials',
};

function setup(options: { held?: HeldRef; rejected?: string } = {}) {
  const peeks: { at: number; request: Parameters<TokenCoordinator['peek']>[0] }[] = [];
  const answers: (() => Promise<Adopted | undefined>)[] = [];
  const adopted: { tokenSet: SharedTokenSet; generation: number }[] = [];
  const logs: string[] = [];
  const state = { waiting: true };
  const coordinator: TokenCoordinator = {
    obtain: () => Promise.reject(new Error('not used')),
    peek: (request) => {
      peeks.push({ at: Date.now(), request });
      return (answers.shift() ?? (() => Promise.resolve(undefined)))();
    },
    status: () => ({ url: 'redis://x', up: true, lastError: null, generation: null }),
  };
  const watch = new StoreWatch({
    coordinator,
    clock: systemClock,
    log: createLogger({ level: 'trace', destination: { write: (l: string) => void logs.push(l) } }),
    held: () => options.held,
    rejectedToken: () => options.rejected,
    stillWaiting: (f) => state.waiting && f === failure,
    adopt: (tokenSet, generation) => adopted.push({ tokenSet, generation }),
  });
  return { watch, peeks, answers, adopted, logs, state };
}

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('StoreWatch', () => {
  it('no valid token: looks every poll interval until a set is there, then adopts it', async () => {
    const h = setup({ rejected: 'access-401' });
    h.answers.push(
      () => Promise.resolve(undefined),
      () => Promise.resolve({ kind: 'adopted', tokenSet: set, generation: 3 }),
    );
    h.watch.start(failure);
    await vi.advanceTimersByTimeAsync(LEASE_POLL_MS - 1);
    expect(h.peeks).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.peeks).toEqual([
      { at: T0 + LEASE_POLL_MS, request: { held: undefined, rejectedToken: 'access-401' } },
    ]);
    await vi.advanceTimersByTimeAsync(LEASE_POLL_MS);
    expect(h.peeks.map((p) => p.at)).toEqual([T0 + LEASE_POLL_MS, T0 + 2 * LEASE_POLL_MS]);
    expect(h.adopted).toEqual([{ tokenSet: set, generation: 3 }]);
    // Adopted: no further look.
    await vi.advanceTimersByTimeAsync(10 * LEASE_POLL_MS);
    expect(h.peeks).toHaveLength(2);
  });

  it('a token still valid: the first look is at its expiry', async () => {
    const held = { accessToken: 'access-1', expiresAt: T0 + 30_000 };
    const h = setup({ held });
    h.watch.start(failure);
    await vi.advanceTimersByTimeAsync(29_999);
    expect(h.peeks).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.peeks).toEqual([{ at: T0 + 30_000, request: { held, rejectedToken: undefined } }]);
  });

  it('once the retry started (or anything else happened), what it found is not adopted', async () => {
    const h = setup();
    h.answers.push(() => Promise.resolve({ kind: 'adopted', tokenSet: set, generation: 3 }));
    h.watch.start(failure);
    h.state.waiting = false;
    await vi.advanceTimersByTimeAsync(LEASE_POLL_MS);
    expect(h.peeks).toHaveLength(1);
    expect(h.adopted).toEqual([]);
    await vi.advanceTimersByTimeAsync(10 * LEASE_POLL_MS);
    expect(h.peeks).toHaveLength(1);
  });

  it('a store error ends the watch, with a debug line', async () => {
    const h = setup();
    h.answers.push(() => Promise.reject(new Error('store PING: no answer within 500 ms')));
    h.watch.start(failure);
    await vi.advanceTimersByTimeAsync(10 * LEASE_POLL_MS);
    expect(h.peeks).toHaveLength(1);
    expect(h.adopted).toEqual([]);
    expect(h.logs.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({
        level: 'debug',
        event: 'store',
        error: 'store PING: no answer within 500 ms',
      }),
    ]);
  });

  it('clear, or a new start, cancels the pending look', async () => {
    const h = setup();
    h.watch.start(failure);
    h.watch.clear();
    await vi.advanceTimersByTimeAsync(10 * LEASE_POLL_MS);
    expect(h.peeks).toEqual([]);
    h.watch.start(failure);
    await vi.advanceTimersByTimeAsync(LEASE_POLL_MS / 2);
    h.watch.start(failure);
    await vi.advanceTimersByTimeAsync(LEASE_POLL_MS / 2);
    expect(h.peeks).toEqual([]);
    await vi.advanceTimersByTimeAsync(LEASE_POLL_MS / 2);
    expect(h.peeks).toHaveLength(1);
  });
});
