import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock, type Clock } from '../clock.js';
import { ExpiryQueue, type Expiring } from './expiry-queue.js';

class Item implements Expiring {
  expiryAt = 0;
  expiryPrev: Expiring | undefined;
  expiryNext: Expiring | undefined;
  expiryQueued = false;
  expiredAt: number | undefined;
  constructor(readonly addedAt: number) {}
}

describe('ExpiryQueue', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  /** A queue on the fake clock; `lagMs` makes every timer fire that much late (a busy loop). */
  function queue(ms: number, options: { onExpire?: (item: Item) => void; lagMs?: number } = {}) {
    const expired: Item[] = [];
    const lag = options.lagMs ?? 0;
    const clock: Pick<Clock, 'setTimeout'> = {
      setTimeout: (fn, delay) => systemClock.setTimeout(fn, delay + lag),
    };
    const q = new ExpiryQueue<Item>(
      clock,
      ms,
      (item) => {
        item.expiredAt = Date.now();
        expired.push(item);
        options.onExpire?.(item);
      },
      () => Date.now(),
    );
    return { q, expired };
  }

  it.each([1, 7, 100, 30_000, 600_000])(
    'expires every item %i ms after it was added, never earlier, in the order added',
    (ms) => {
      const { q, expired } = queue(ms);
      const items: Item[] = [];
      for (let t = 0; t < 40; t++) {
        const item = new Item(Date.now());
        q.add(item);
        items.push(item);
        vi.advanceTimersByTime(t % 3);
      }
      vi.advanceTimersByTime(ms + 100);
      expect(expired).toEqual(items);
      for (const item of items) {
        const waited = (item.expiredAt as number) - item.addedAt;
        expect(waited).toBeGreaterThanOrEqual(ms);
        expect(waited).toBeLessThanOrEqual(ms + 1);
      }
      expect(q.size).toBe(0);
    },
  );

  it('is late by the loop lag of one timer, however long it runs: the lag never adds up', () => {
    const ms = 1_000;
    const lag = 20;
    const { q, expired } = queue(ms, { lagMs: lag });
    // Ten timeouts' worth of traffic: a call every millisecond, nearly all answered within 3 ms,
    // every 50th never answered.
    const live: Item[] = [];
    for (let t = 0; t < 10 * ms; t++) {
      const item = new Item(Date.now());
      q.add(item);
      if (t % 50 !== 0) live.push(item);
      while (live.length > 3) q.remove(live.shift() as Item);
      vi.advanceTimersByTime(1);
    }
    vi.advanceTimersByTime(ms + 2 * lag);
    // 200 never answered, and the last 3 still waiting when the traffic stopped.
    expect(expired).toHaveLength(203);
    for (const item of expired) {
      const late = (item.expiredAt as number) - item.addedAt - ms;
      expect(late).toBeGreaterThanOrEqual(0);
      expect(late).toBeLessThanOrEqual(lag + 1);
    }
  });

  it('never expires an item that was removed, and removing twice is harmless', () => {
    const { q, expired } = queue(100);
    const [a, b, c] = [new Item(0), new Item(0), new Item(0)];
    q.add(a);
    q.add(b);
    q.add(c);
    q.remove(b);
    q.remove(b);
    q.remove(a);
    expect(q.size).toBe(1);
    vi.advanceTimersByTime(200);
    expect(expired).toEqual([c]);
    expect(q.size).toBe(0);
  });

  it('runs one timer however many items are queued, and none once the queue is empty', () => {
    const { q } = queue(1_000);
    const items = Array.from({ length: 10_000 }, () => new Item(0));
    for (const item of items) q.add(item);
    expect(vi.getTimerCount()).toBe(1);
    for (const item of items) q.remove(item);
    // The timer runs out at the old front's deadline, finds nothing and stops.
    vi.advanceTimersByTime(1_000);
    expect(vi.getTimerCount()).toBe(0);
    q.add(new Item(Date.now()));
    expect(vi.getTimerCount()).toBe(1);
  });

  it('lets an expiry remove itself again and queue a new item, which gets a full time of its own', () => {
    let second: Item | undefined;
    const { q, expired } = queue(100, {
      onExpire: (item) => {
        q.remove(item);
        if (second === undefined) {
          second = new Item(Date.now());
          q.add(second);
        }
      },
    });
    const first = new Item(0);
    q.add(first);
    vi.advanceTimersByTime(100);
    expect(expired).toEqual([first]);
    vi.advanceTimersByTime(99);
    expect(expired).toEqual([first]);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual([first, second]);
  });

  it('keeps its timer when an expiry throws', () => {
    const { q, expired } = queue(100, {
      onExpire: (item) => {
        if (item.addedAt === 0) throw new Error('boom');
      },
    });
    q.add(new Item(0));
    vi.advanceTimersByTime(10);
    q.add(new Item(10));
    expect(() => vi.advanceTimersByTime(100)).toThrow('boom');
    vi.advanceTimersByTime(10);
    expect(expired.map((i) => i.addedAt)).toEqual([0, 10]);
  });

  it('moves an item added again to the back with a new time', () => {
    const { q, expired } = queue(100);
    const a = new Item(0);
    const b = new Item(0);
    q.add(a);
    q.add(b);
    vi.advanceTimersByTime(60);
    q.add(a);
    expect(q.size).toBe(2);
    vi.advanceTimersByTime(40);
    expect(expired).toEqual([b]);
    vi.advanceTimersByTime(59);
    expect(expired).toEqual([b]);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual([b, a]);
  });
});
