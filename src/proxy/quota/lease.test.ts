import { describe, expect, it } from 'vitest';
import { CallerState } from './fair-queue.js';
import { LEASE_MS, MAX_BATCH, SlotLeases } from './lease.js';

const limit = { count: 1_000, periodMs: 1_000 };

describe('leased batches of fleet slots', () => {
  it('a batch is the caller’s admissions over the last lease window, at most MAX_BATCH', () => {
    const leases = new SlotLeases(limit);
    const alpha = new CallerState('alpha', 1, 'interactive');
    expect(leases.size(alpha, 0)).toBe(0);
    for (let i = 0; i < 10; i++) leases.admitted(alpha, i);
    expect(leases.size(alpha, 10)).toBe(10);
    // The next window starts from the last one's count.
    expect(leases.size(alpha, LEASE_MS + 10)).toBe(10);
    for (let i = 0; i < 200; i++) leases.admitted(alpha, LEASE_MS + 20);
    expect(leases.size(alpha, LEASE_MS + 20)).toBe(MAX_BATCH);
    // A caller quiet for two windows starts again from nothing.
    expect(leases.size(alpha, 4 * LEASE_MS)).toBe(0);
  });

  it('never more than the limit refills in one lease window', () => {
    expect(new SlotLeases({ count: 10, periodMs: 1_000 }).maxBatch).toBe(5);
    const slow = new SlotLeases({ count: 6, periodMs: 60_000 });
    const alpha = new CallerState('alpha', 1, 'interactive');
    for (let i = 0; i < 5; i++) slow.admitted(alpha, 0);
    expect(slow.size(alpha, 0)).toBe(0);
  });

  it('slots are spent by their caller only, until the lease ends', () => {
    const leases = new SlotLeases(limit);
    const alpha = new CallerState('alpha', 1, 'interactive');
    const bravo = new CallerState('bravo', 1, 'interactive');
    leases.add(alpha, 2, 100);
    expect(leases.take(bravo, 100)).toBe(false);
    expect(leases.take(alpha, 200)).toBe(true);
    expect(leases.held(alpha, 200)).toBe(1);
    expect(leases.take(alpha, 100 + LEASE_MS)).toBe(false);
    expect(leases.held(alpha, 100 + LEASE_MS)).toBe(0);
  });

  it('a new lease replaces what is left of the old one; a cooldown drops every lease', () => {
    const leases = new SlotLeases(limit);
    const alpha = new CallerState('alpha', 1, 'interactive');
    const bravo = new CallerState('bravo', 1, 'interactive');
    leases.add(alpha, 5, 0);
    leases.add(alpha, 1, 10);
    expect(leases.held(alpha, 10)).toBe(1);
    leases.add(bravo, 3, 10);
    leases.dropAll();
    expect(leases.take(alpha, 20)).toBe(false);
    expect(leases.take(bravo, 20)).toBe(false);
  });
});
