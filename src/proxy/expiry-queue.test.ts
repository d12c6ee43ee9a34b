import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import { ExpiryQueue, MAX_TICK_MS, type Expiring } from './expiry-queue.js';

class Item implements Expiring {
  expiryTick = 0;
  expiryPrev: Expiring | undefined;
  expiryNext: Expiring | undefined;
  expiryQueued = false;
  expiredAt: number | undefined;
  constructor(readonly addedAt: number) {}
}

describe('ExpiryQueue', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  function queue(ms: number, onExpire?: (item: Item) => void) {
    const expired: Item[] = [];
    const q = new ExpiryQueue<Item>(systemClock, ms, (item) => {
      item.expiredAt = Date.now();
      expired.push(item);
      onExpire?.(item);
    });
    return { q, expired };
  }

  it.each([
    [1, 1],
    [100, 5],
    [1_000, 50],
    [30_000, MAX_TICK_MS],
  ])(
    'expires every item no earlier than %i ms after it was added, and less than two ticks (%i ms) later',
    (ms, tick) => {
      const { q, expired } = queue(ms);
      const items: Item[] = [];
      // Added at every millisecond across several ticks: each phase against the ticker.
      for (let t = 0; t < 3 * tick + 3; t++) {
        const item = new Item(Date.now());
        q.add(item);
        items.push(item);
        vi.advanceTimersByTime(1);
      }
      vi.advanceTimersByTime(ms + 2 * tick);
      expect(expired).toEqual(items);
      for (const item of items) {
        const waited = (item.expiredAt as number) - item.addedAt;
        expect(waited).toBeGreaterThanOrEqual(ms);
        expect(waited).toBeLessThan(ms + 2 * tick);
      }
      expect(q.size).toBe(0);
    },
  );

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
    // The running tick finds nothing and stops.
    vi.advanceTimersByTime(50);
    expect(vi.getTimerCount()).toBe(0);
    q.add(new Item(Date.now()));
    expect(vi.getTimerCount()).toBe(1);
  });

  it('lets an expiry remove itself again and queue a new item, which gets a full time of its own', () => {
    let second: Item | undefined;
    const { q, expired } = queue(100, (item) => {
      q.remove(item);
      if (second === undefined) {
        second = new Item(Date.now());
        q.add(second);
      }
    });
    const first = new Item(0);
    q.add(first);
    vi.advanceTimersByTime(110);
    expect(expired).toEqual([first]);
    vi.advanceTimersByTime(100);
    expect(expired).toEqual([first, second]);
    const waited = (second!.expiredAt as number) - second!.addedAt;
    expect(waited).toBeGreaterThanOrEqual(100);
  });

  it('keeps ticking when an expiry throws', () => {
    const { q, expired } = queue(100, (item) => {
      if (item.addedAt === 0) throw new Error('boom');
    });
    q.add(new Item(0));
    q.add(new Item(1));
    expect(() => vi.advanceTimersByTime(110)).toThrow('boom');
    vi.advanceTimersByTime(110);
    expect(expired.map((i) => i.addedAt)).toEqual([0, 1]);
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
    vi.advanceTimersByTime(50);
    expect(expired).toEqual([b]);
    vi.advanceTimersByTime(60);
    expect(expired).toEqual([b, a]);
  });
});
