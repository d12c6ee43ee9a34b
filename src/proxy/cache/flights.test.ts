/**
 * Coalescing in one process on fake timers: a fill's waiters, what wakes them, the deadline no
 * waiter outlives, and how a leader's leaving hands the fill over.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { exchangeView, FakeResponse } from '../../../test/helpers/exchange-view.js';
import { Flights, waitFor, type Flight } from './flights.js';

const MAX_WAIT_MS = 5_000;
let settled: string[];

function flights(): Flights {
  return new Flights(MAX_WAIT_MS, (key) => settled.push(key));
}

beforeEach(() => {
  vi.useFakeTimers();
  settled = [];
});
afterEach(() => {
  vi.useRealTimers();
});

describe('flights', () => {
  it('a settled fill wakes its waiters once, leaves the map and reports itself once', async () => {
    const all = flights();
    const flight = all.start('k');
    expect(all.get('k')).toBe(flight);
    const exchanges = [1, 2, 3].map(() => exchangeView({ url: '/a' }));
    const waits = exchanges.map((exchange) => waitFor(flight, exchange));
    expect(all.waiting()).toBe(3);
    flight.settle();
    flight.settle();
    expect(await Promise.all(waits)).toEqual(['done', 'done', 'done']);
    expect(all.has('k')).toBe(false);
    expect(all.waiting()).toBe(0);
    expect(settled).toEqual(['k']);
    expect(flight.abandoned).toBe(false);
    // A woken waiter no longer listens for its client's leaving (a kept-alive socket serves many).
    for (const exchange of exchanges) expect(exchange.fake.listenerCount('close')).toBe(0);
  });

  it('a waiter whose client leaves is dropped at once; one already gone never waits', async () => {
    const flight = flights().start('k');
    const leaving = exchangeView({ url: '/a' });
    const wait = waitFor(flight, leaving);
    expect(flight.waiters).toBe(1);
    leaving.fake.leave();
    expect(await wait).toBe('gone');
    expect(flight.waiters).toBe(0);
    expect(flight.settled).toBe(false);
    expect(await waitFor(flight, leaving)).toBe('gone');
    expect(flight.waiters).toBe(0);
  });

  it('no waiter outlives maxWaitMs, however the fill goes', async () => {
    const all = flights();
    const flight = all.start('k');
    let woke = false;
    void waitFor(flight, exchangeView({ url: '/a' })).then(() => (woke = true));
    await vi.advanceTimersByTimeAsync(MAX_WAIT_MS - 1);
    expect(woke).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(woke).toBe(true);
    expect(all.has('k')).toBe(false);
    expect(settled).toEqual(['k']);
  });

  it('a settled fill stops its deadline', () => {
    const flight = flights().start('k');
    flight.settle();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a newer fill of the key is not removed by an older one settling late', () => {
    const all = flights();
    const old = all.start('k');
    const newer = all.start('k');
    old.settle();
    expect(all.get('k')).toBe(newer);
  });

  describe('lead', () => {
    function led(): { all: Flights; flight: Flight; res: FakeResponse } {
      const all = flights();
      const res = new FakeResponse();
      const flight = all.lead(exchangeView({ url: '/a' }, res), 'k');
      return { all, flight, res };
    }

    it('a requester that leaves before the head abandons the fill: waiters coalesce again', () => {
      const { flight, res } = led();
      res.leave();
      expect(flight.settled).toBe(true);
      expect(flight.abandoned).toBe(true);
    });

    it('an answer that ended before capturing settles the fill, not abandoned', () => {
      const { flight, res } = led();
      res.writeHead(502);
      res.emit('close');
      expect(flight.settled).toBe(true);
      expect(flight.abandoned).toBe(false);
    });

    it('once capturing, only the capture settles the fill', () => {
      const { all, flight, res } = led();
      flight.captured = true;
      res.leave();
      expect(flight.settled).toBe(false);
      expect(all.get('k')).toBe(flight);
    });
  });
});
