import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../clock.js';
import type { SharedCooldown, SharedQuota } from '../../fleet/ports.js';
import { FleetLink, SHARED_POLL_MS } from './fleet-link.js';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-11-23T01:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

function store() {
  const state = {
    up: true,
    connecting: false,
    reads: 0,
    published: [] as [number, number][],
    cooldown: undefined as SharedCooldown | undefined,
  };
  const shared: SharedQuota = {
    take: () => Promise.reject(new Error('not used')),
    startCooldown: (status, ms) => {
      state.published.push([status, ms]);
      return Promise.resolve();
    },
    readCooldown: () => {
      state.reads += 1;
      return state.up ? Promise.resolve(state.cooldown) : Promise.reject(new Error('down'));
    },
    health: () => ({
      up: state.up,
      connecting: state.connecting,
      lastError: state.up ? null : { message: 'ECONNREFUSED', at: '' },
    }),
  };
  return { state, shared };
}

describe("the guard's link to the fleet store", () => {
  it('reads the fleet cooldown every poll and hands one in force to the guard', async () => {
    const { state, shared } = store();
    const seen: SharedCooldown[] = [];
    const link = new FleetLink(shared, systemClock, SHARED_POLL_MS, (c) => seen.push(c));
    link.start();
    await vi.advanceTimersByTimeAsync(SHARED_POLL_MS * 4);
    expect(state.reads).toBe(4);
    expect(seen).toEqual([]);
    state.cooldown = { status: 429, msLeft: 5_000 };
    await vi.advanceTimersByTimeAsync(SHARED_POLL_MS);
    expect(seen).toEqual([{ status: 429, msLeft: 5_000 }]);
    link.close();
    await vi.advanceTimersByTimeAsync(SHARED_POLL_MS * 4);
    expect(state.reads).toBe(5);
  });

  it('is fleet-wide while the store is up or still connecting; says why not otherwise', async () => {
    const { state, shared } = store();
    const link = new FleetLink(shared, systemClock, SHARED_POLL_MS, () => undefined);
    expect([link.active(), link.error()]).toEqual([true, null]);
    state.up = false;
    state.connecting = true;
    expect(link.active()).toBe(true);
    state.connecting = false;
    expect([link.active(), link.error()]).toEqual([false, 'ECONNREFUSED']);
    // A failed poll keeps polling: it is what finds the store back.
    link.start();
    await vi.advanceTimersByTimeAsync(SHARED_POLL_MS * 2);
    expect(state.reads).toBe(2);
    link.close();
  });

  it('publishes a cooldown taken here only while the store is used', () => {
    const { state, shared } = store();
    const link = new FleetLink(shared, systemClock, SHARED_POLL_MS, () => undefined);
    link.publish(503, 1_000);
    state.up = false;
    link.publish(429, 2_000);
    expect(state.published).toEqual([[503, 1_000]]);
  });
});
