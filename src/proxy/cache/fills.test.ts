/**
 * A fill's answer on an injected clock: which answers are stored (status, cookies, lifetime,
 * `Vary`, size, an `Age` past every window), the copy captured while the body streams, and the
 * store here and (holding the fleet's lease) in a hand-made store port.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { beforeEach, describe, expect, it } from 'vitest';
import { sharedStorePort, type SharedStorePort } from '../../../test/helpers/shared-store-port.js';
import { createMetricsRegistry } from '../../telemetry/exposition.js';
import { createMetrics, type SidecarMetrics } from '../../telemetry/metrics.js';
import { createCacheEntries, type CacheEntries, type StoredAnswer } from './entries.js';
import { capture, captureSpec, Fills } from './fills.js';
import { Flights } from './flights.js';
import type { FillPlan } from './plans.js';
import { SharedTier } from './shared-tier.js';

const T0 = 1_767_225_600_000;
const WINDOWS = { ifError: 100, whileRevalidate: 10 };
const LIMITS = { maxEntryBytes: 64, stale: WINDOWS, now: T0, upstreamCacheStatus: undefined };

let now: number;
let entries: CacheEntries;
let metrics: SidecarMetrics;
let written: SharedStorePort['written'];

function plan(overrides: Partial<FillPlan> = {}): FillPlan {
  return {
    kind: 'fill',
    member: 'oauth-sidecar; fwd=uri-miss',
    key: '/a\n\n',
    path: '/a',
    rule: { prefix: '/', ttlSeconds: 60 },
    headers: { 'accept-language': 'de' },
    flight: undefined,
    generation: 0,
    stale: undefined,
    ...overrides,
  };
}

function sharedTier(): SharedTier {
  const store = sharedStorePort();
  written = store.written;
  return new SharedTier({
    entries: store.port,
    maxEntryBytes: 32,
    maxWaitMs: 5_000,
    now: () => now,
    metrics,
  });
}

beforeEach(() => {
  now = T0;
  entries = createCacheEntries({ maxBytes: 64 * 1024 });
  metrics = createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false });
  written = [];
});

describe('captureSpec', () => {
  it('stores only a 200 without a cookie, with a lifetime, a Vary other than *, and room', () => {
    const ok: IncomingHttpHeaders = { 'cache-control': 'max-age=30' };
    expect(captureSpec(plan(), 200, ok, LIMITS)).toBeDefined();
    expect(captureSpec(plan(), 203, ok, LIMITS)).toBeUndefined();
    expect(captureSpec(plan(), 200, { ...ok, 'set-cookie': ['a=b'] }, LIMITS)).toBeUndefined();
    expect(captureSpec(plan(), 200, { 'cache-control': 'no-store' }, LIMITS)).toBeUndefined();
    expect(captureSpec(plan(), 200, { ...ok, vary: '*' }, LIMITS)).toBeUndefined();
    expect(captureSpec(plan(), 200, { ...ok, 'content-length': '65' }, LIMITS)).toBeUndefined();
    expect(captureSpec(plan(), 200, { ...ok, 'content-length': '64' }, LIMITS)).toBeDefined();
  });

  it("keeps the rule's or the answer's shorter lifetime, the API's Age and Cache-Status, no per-answer field", () => {
    const spec = captureSpec(
      plan(),
      200,
      {
        'cache-control': 'max-age=30, stale-if-error=5',
        age: '4',
        'x-request-id': 'upstream-id',
        ratelimit: '"default";r=1',
        'cache-status': 'api; fwd=miss',
        vary: 'Accept-Language',
      },
      { ...LIMITS, upstreamCacheStatus: 'api; hit' },
    );
    expect(spec).toMatchObject({ seconds: 30, ageSeconds: 4, vary: ['accept-language'] });
    expect(spec?.stale).toEqual({ ifError: 5, whileRevalidate: 10 });
    expect(spec?.headers['cache-status']).toBe('api; hit');
    expect(spec?.headers['x-request-id']).toBeUndefined();
    expect(spec?.headers.ratelimit).toBeUndefined();
    expect(spec?.headers.age).toBeUndefined();
  });

  it('an answer older on arrival than its lifetime and every stale window is not stored', () => {
    const headers = { 'cache-control': 'max-age=30' };
    expect(captureSpec(plan(), 200, { ...headers, age: '129' }, LIMITS)).toBeDefined();
    expect(captureSpec(plan(), 200, { ...headers, age: '130' }, LIMITS)).toBeUndefined();
  });
});

describe('capture', () => {
  function tap(maxEntryBytes = 64) {
    const spec = captureSpec(plan(), 200, { 'cache-control': 'max-age=30', age: '2' }, LIMITS)!;
    const result: { answer?: StoredAnswer | undefined; over: boolean } = { over: false };
    const captured = (answer: StoredAnswer | undefined) => {
      result.answer = answer;
      result.over = true;
    };
    return { result, tap: capture({ entries, maxEntryBytes, now: () => now, captured }, spec) };
  }

  it('an answer that arrived whole is an entry dated from the API cache, with its windows', () => {
    const { result, tap: t } = tap();
    t.chunk(Buffer.from('hel'));
    t.chunk(Buffer.from('lo'));
    expect(t.owning?.()).toBe(true);
    now = T0 + 500;
    t.end(true);
    expect(t.owning?.()).toBe(false);
    const answer = result.answer!;
    expect(answer.body.toString()).toBe('hello');
    expect(answer.headers['content-length']).toBe('5');
    expect(answer.storedAt).toBe(T0 + 500 - 2_000);
    expect(answer.expiresAt).toBe(answer.storedAt + 30_000);
    expect(answer.staleIfErrorUntil).toBe(answer.expiresAt + 100_000);
    expect(answer.staleWhileRevalidateUntil).toBe(answer.expiresAt + 10_000);
    expect(answer.varyValues).toEqual([]);
  });

  it('a body cut short, or one that outgrows the limit, is dropped and its room given back', () => {
    const cut = tap();
    cut.tap.chunk(Buffer.from('abc'));
    cut.tap.end(false);
    expect(cut.result).toEqual({ answer: undefined, over: true });
    const large = tap(4);
    large.tap.chunk(Buffer.from('abc'));
    large.tap.chunk(Buffer.from('de'));
    expect(large.result).toEqual({ answer: undefined, over: true });
    expect(large.tap.owning?.()).toBe(false);
    // Nothing stays reserved: the whole cache is free for the next capture.
    expect(entries.reserve(64 * 1024)).toBe(true);
  });
});

describe('Fills', () => {
  let generation: number;
  function fills(shared?: SharedTier): Fills {
    return new Fills({
      entries,
      maxEntryBytes: 64,
      windows: WINDOWS,
      clock: { now: () => now },
      shared,
      generation: () => generation,
    });
  }
  beforeEach(() => {
    generation = 0;
  });

  it('stores a storable answer once it arrived whole, says so, then settles the fill', () => {
    const flight = new Flights(60_000, () => {}).start('/a\n\n');
    const p = plan({ flight });
    const headers: IncomingHttpHeaders = {
      'cache-control': 'max-age=30',
      'cache-status': 'api; hit',
    };
    const t = fills().answered(p, 200, headers, headers['cache-status'])!;
    expect(headers['cache-status']).toBe('api; hit, oauth-sidecar; fwd=uri-miss; stored');
    expect(flight.captured).toBe(true);
    t.chunk(Buffer.from('ok'));
    expect(flight.settled).toBe(false);
    t.end(true);
    expect(flight.settled).toBe(true);
    const found = entries.lookup(p.key, p.path, p.headers, now);
    expect(found.kind).toBe('hit');
  });

  it('an answer not stored settles the fill at once; one whose path was invalidated meanwhile is not kept', () => {
    const flight = new Flights(60_000, () => {}).start('/a\n\n');
    expect(fills().answered(plan({ flight }), 500, {}, undefined)).toBeUndefined();
    expect(flight.settled).toBe(true);
    const f = fills();
    const t = f.answered(plan(), 200, { 'cache-control': 'max-age=30' }, undefined)!;
    generation = 1;
    t.chunk(Buffer.from('ok'));
    t.end(true);
    expect(entries.stats().entries).toBe(0);
  });

  /** A fill holding the fleet's lease (generation 9), its answer's head just arrived. */
  function leasedFill() {
    const flight = new Flights(60_000, () => {}).start('/a\n\n');
    flight.lease = { generation: '9' };
    const head = { 'cache-control': 'max-age=30' };
    const t = fills(sharedTier()).answered(plan({ flight }), 200, head, undefined)!;
    return { flight, t };
  }

  it("holding the fleet's lease: the answer goes to the store under the lease's generation", () => {
    const { flight, t } = leasedFill();
    t.chunk(Buffer.from('ok'));
    t.end(true);
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({ key: '/a\n\n', generation: '9' });
    expect(written[0]!.answer.body.toString()).toBe('ok');
    expect(flight.shared).toBe(true);
  });

  it('an answer too large for the store stays local and gives the lease back', () => {
    const { flight, t } = leasedFill();
    t.chunk(Buffer.alloc(40, 'x'));
    expect(flight.lease).toBeUndefined();
    t.end(true);
    expect(written).toEqual([]);
    expect(flight.shared).toBe(false);
    expect(entries.stats().entries).toBe(1);
  });
});
