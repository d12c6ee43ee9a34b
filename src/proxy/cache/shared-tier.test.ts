/**
 * The shared tier's waiting rules against a hand-made store port, on fake timers: how long a
 * request waits for another member's fill, what ends the wait, and what a failing store means.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { SharedAnswer, SharedCacheEntries, SharedRead } from '../../fleet/ports.js';
import { expose, createMetricsRegistry } from '../../telemetry/exposition.js';
import { createMetrics, type SidecarMetrics } from '../../telemetry/metrics.js';
import { SharedTier, type Asking } from './shared-tier.js';

const ANSWER: SharedAnswer = {
  headers: { 'content-length': '2' },
  body: Buffer.from('ok'),
  freshMs: 60_000,
  staleIfErrorMs: 0,
  staleWhileRevalidateMs: 0,
  vary: [],
  varyValues: [],
};

function store(reads: (n: number) => SharedRead | Error): SharedCacheEntries & { reads: number } {
  const port = {
    reads: 0,
    read() {
      const result = reads(++port.reads);
      return result instanceof Error ? Promise.reject(result) : Promise.resolve(result);
    },
    write: () => Promise.resolve(),
    release: () => Promise.resolve(),
    renew: () => Promise.resolve(true),
    leaseTtlMs: 3_000,
    invalidate: () => Promise.resolve(),
    health: () => ({ up: true, connecting: false }),
  };
  return port;
}

const held: SharedRead = { answer: undefined, ageMs: 0, generation: '0', lease: 'held' };
let metrics: SidecarMetrics;

/** A request of this process: a minute fresh, no stale windows, never stale-ok. */
function ask(headers: Record<string, string>, gone: () => boolean): Asking {
  return {
    headers,
    limits: { freshMs: 60_000, staleIfErrorMs: 0, staleWhileRevalidateMs: 0 },
    staleOk: () => false,
    gone,
  };
}

function tier(entries: SharedCacheEntries) {
  return new SharedTier({
    entries,
    maxEntryBytes: 1024,
    maxWaitMs: 5_000,
    now: () => Date.now(),
    metrics,
  });
}

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
  metrics = createMetrics({
    registry: createMetricsRegistry(),
    defaultMetrics: false,
  });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('shared tier lookups', () => {
  it('waits while another member fills, and takes the entry when it lands', async () => {
    const entries = store((n) => (n < 4 ? held : { ...held, lease: 'none', answer: ANSWER }));
    const found = tier(entries).lookup(
      'k',
      '/p',
      ask({}, () => false),
    );
    await vi.advanceTimersByTimeAsync(1_000);
    const result = await found;
    expect(result?.answer?.body.toString()).toBe('ok');
    expect(result?.lease).toBeUndefined();
    expect(entries.reads).toBe(4);
  });

  it('takes the lease once the holder gave it up without an entry', async () => {
    const entries = store((n) => (n < 3 ? held : { ...held, lease: 'taken', generation: '7' }));
    const found = tier(entries).lookup(
      'k',
      '/p',
      ask({}, () => false),
    );
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await found).toMatchObject({ lease: { generation: '7' }, held: false });
  });

  it('waits at most the lease TTL, reading the store at most every 500 ms', async () => {
    const entries = store(() => held);
    const found = tier(entries).lookup(
      'k',
      '/p',
      ask({}, () => false),
    );
    await vi.advanceTimersByTimeAsync(10_000);
    const result = await found;
    expect(result).toMatchObject({ answer: undefined, lease: undefined, held: true });
    expect(Date.now() - new Date('2026-01-01T00:00:00Z').getTime()).toBeLessThanOrEqual(10_000);
    // 50, 75, 112, ... up to 500 ms apart within 5 s: about 15 reads, never one per millisecond.
    expect(entries.reads).toBeGreaterThan(5);
    expect(entries.reads).toBeLessThan(25);
  });

  it('stops waiting when the client leaves', async () => {
    let gone = false;
    const entries = store(() => held);
    const found = tier(entries).lookup(
      'k',
      '/p',
      ask({}, () => gone),
    );
    await vi.advanceTimersByTimeAsync(200);
    gone = true;
    await vi.advanceTimersByTimeAsync(600);
    expect(await found).toMatchObject({ held: true });
    expect(entries.reads).toBeLessThan(6);
  });

  it('a failing store is a miss (undefined), counted as an error', async () => {
    const result = await tier(store(() => new Error('down'))).lookup(
      'k',
      '/p',
      ask({}, () => false),
    );
    expect(result).toBeUndefined();
    const text = (await expose(metrics.registry, undefined)).body;
    expect(text).toContain('oauth_sidecar_cache_shared_requests_total{result="error"} 1');
  });

  it("an entry for another Vary selection, or with nonsense lifetimes, is not this request's", async () => {
    const varied = { ...ANSWER, vary: ['accept-language'], varyValues: ['de'] };
    const other = await tier(store(() => ({ ...held, lease: 'taken', answer: varied }))).lookup(
      'k',
      '/p',
      ask({ 'accept-language': 'fr' }, () => false),
    );
    expect(other?.answer).toBeUndefined();
    const broken = { ...ANSWER, freshMs: -5 };
    const nonsense = await tier(store(() => ({ ...held, lease: 'taken', answer: broken }))).lookup(
      'k',
      '/p',
      ask({}, () => false),
    );
    expect(nonsense?.answer).toBeUndefined();
  });

  it("cuts another member's longer lifetimes to this process's own rule and windows", async () => {
    const long = { ...ANSWER, freshMs: 86_400_000, staleIfErrorMs: 86_400_000 };
    const result = await tier(store(() => ({ ...held, lease: 'none', answer: long }))).lookup(
      'k',
      '/p',
      {
        ...ask({}, () => false),
        limits: { freshMs: 60_000, staleIfErrorMs: 30_000, staleWhileRevalidateMs: 0 },
      },
    );
    const answer = result!.answer!;
    expect(answer.expiresAt - answer.storedAt).toBe(60_000);
    expect(answer.staleIfErrorUntil - answer.expiresAt).toBe(30_000);
  });

  it("an entry written with the API's Age is that much older: its lifetime and its Age count from before", async () => {
    const written: SharedAnswer[] = [];
    const port = store(() => ({ ...held, lease: 'none', ageMs: 5_000, answer: written[0] }));
    port.write = (_key, _path, answer) => {
      written.push(answer);
      return Promise.resolve();
    };
    const now = Date.now();
    // Stored locally 20 s old (Age: 20 from the API), 30 s of lifetime from then.
    const local = {
      headers: { 'content-length': '2' },
      body: Buffer.from('ok'),
      storedAt: now - 20_000,
      expiresAt: now + 10_000,
      staleIfErrorUntil: now + 10_000,
      staleWhileRevalidateUntil: now + 10_000,
      vary: [],
      varyValues: [],
      size: 0,
    };
    expect(tier(port).share('k', '/p', local, '0')).toBe(true);
    expect(written[0]).toMatchObject({ freshMs: 10_000, headers: { age: '20' } });
    // Read by another member 5 s after it was written: 25 s old, 5 s fresh, no `age` kept.
    const result = await tier(port).lookup(
      'k',
      '/p',
      ask({}, () => false),
    );
    const answer = result!.answer!;
    expect(Date.now() - answer.storedAt).toBeGreaterThanOrEqual(25_000);
    expect(answer.expiresAt - Date.now()).toBeLessThanOrEqual(5_000);
    expect(answer.expiresAt - Date.now()).toBeGreaterThan(4_000);
    expect(answer.headers.age).toBeUndefined();
  });
});

describe('the fill lease while a fill is under way', () => {
  function renewing(answers: boolean[] = []) {
    const port = Object.assign(
      store(() => held),
      {
        renewed: 0,
        released: 0,
      },
    );
    port.renew = () => Promise.resolve(answers[port.renewed++] ?? true);
    port.release = () => {
      port.released += 1;
      return Promise.resolve();
    };
    return port;
  }
  const fill = () => ({
    settled: false,
    lease: { generation: '0' } as { generation: string } | undefined,
    captured: false,
    progressAt: 0,
  });

  it('is renewed every third of its TTL while the answer makes progress, and no longer once over', async () => {
    const entries = renewing();
    const filling = fill();
    tier(entries).keep('k', filling);
    // Waiting for the head: renewed.
    await vi.advanceTimersByTimeAsync(3_000);
    expect(entries.renewed).toBe(3);
    // The body arriving: renewed; stalled for a TTL: not (the lease lapses for another member).
    filling.captured = true;
    filling.progressAt = Date.now();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(entries.renewed).toBe(5);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(entries.renewed).toBe(5);
    filling.progressAt = Date.now();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(entries.renewed).toBe(6);
    filling.settled = true;
    await vi.advanceTimersByTimeAsync(5_000);
    expect(entries.renewed).toBe(6);
  });

  it('stops renewing once the lease is another member’s, or given back', async () => {
    const lost = renewing([true, false]);
    tier(lost).keep('k', fill());
    await vi.advanceTimersByTimeAsync(10_000);
    expect(lost.renewed).toBe(2);
    const entries = renewing();
    const filling = fill();
    const shared = tier(entries);
    shared.keep('k', filling);
    shared.giveBack('k', filling);
    shared.giveBack('k', filling);
    expect(entries.released).toBe(1);
    expect(filling.lease).toBeUndefined();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(entries.renewed).toBe(0);
  });
});
