/**
 * The cache stage's rules against a scripted forwarder that calls the hooks as the real one does,
 * with hand-made requests and responses and fake timers.
 * test/response-cache.test.ts runs the same rules through the real proxy stack.
 */
import { createMetricsRegistry } from '../../telemetry/exposition.js';
import type { IncomingHttpHeaders } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../clock.js';
import { SidecarError } from '../../errors.js';
import type { SharedAnswer, SharedCacheEntries, SharedRead } from '../../fleet/ports.js';
import { sharedStorePort } from '../../../test/helpers/shared-store-port.js';
import { createMetrics, type SidecarMetrics } from '../../telemetry/metrics.js';
import { exchangeView, FakeResponse } from '../../../test/helpers/exchange-view.js';
import type { ForwardOutcome } from '../outcome.js';
import type { ExchangeView } from '../stages.js';
import { MAX_REFRESHES } from './refresh.js';
import type { CacheSettings, ResponseCache } from './cache-contract.js';
import { createResponseCache } from './response-cache.js';

/** These tests are about fresh entries; stale answers have their own (stale-answers tests). */
const NO_STALE = {
  shared: false,
  maxSharedEntryBytes: 256 * 1024,
  staleIfErrorSeconds: 0,
  staleWhileRevalidateSeconds: 0,
};

interface Answer {
  status?: number;
  headers?: Record<string, string>;
  /** Body chunks; the whole body is their concatenation. */
  chunks?: string[];
  /** Resolve to let the answer go (for coalescing tests). */
  gate?: Promise<void>;
  /** Reject before any header: the forwarder's SidecarError (the error handler answers 502). */
  fail?: SidecarError;
  /** The response's 'close' comes before the tap's end (an order the cache must not depend on). */
  closeFirst?: boolean;
}

/**
 * The forwarder's side of the stage contract (proxy/stages.ts, forwarder.ts): beforeUpstream,
 * then the next scripted upstream answer through upstreamAnswered, its tap and the response.
 */
function harness(cache: ResponseCache, answers: Answer[]) {
  const calls: string[] = [];
  /** The cache's own background requests (stale-while-revalidate refreshes). */
  const refreshes: string[] = [];
  let n = 0;
  cache.attach?.((exchange) => {
    refreshes.push(exchange.target);
    return run(exchange, exchange.res as unknown as FakeResponse);
  });
  async function forward(
    url: string,
    headers: Record<string, string>,
    method: string,
    res: FakeResponse,
  ): Promise<ForwardOutcome> {
    const exchange = exchangeView({ url, method, headers, requestId: `r${++n}` }, res);
    return run(exchange, res);
  }
  async function run(exchange: ExchangeView, res: FakeResponse): Promise<ForwardOutcome> {
    const url = exchange.target;
    const served = await cache.beforeUpstream!(exchange);
    if (served) return served;
    calls.push(url);
    const answer = answers.shift() ?? { chunks: ['default'] };
    await answer.gate;
    if (answer.fail) {
      const rescued = cache.failed!(exchange, answer.fail);
      if (rescued) return rescued;
      // The proxy handler answers a client's error; a refresh of the cache has no handler.
      if (res instanceof FakeResponse) {
        res.writeHead(502);
        res.end();
      }
      throw answer.fail;
    }
    const status = answer.status ?? 200;
    const upstream: IncomingHttpHeaders = { ...answer.headers };
    const answered = cache.upstreamAnswered!(exchange, status, { headers: upstream });
    if (answered && 'served' in answered) {
      return {
        status: answered.served,
        upstreamStatus: status,
        replayed: false,
        result: 'complete',
      };
    }
    const tap = answered;
    res.writeHead(status, { ...upstream, 'x-request-id': exchange.requestId });
    for (const chunk of answer.chunks ?? []) {
      tap?.chunk(Buffer.from(chunk));
      res.write(Buffer.from(chunk));
    }
    res.end();
    if (answer.closeFirst) {
      res.emit('close');
      // Let everything woken by 'close' run before the capture ends.
      for (let i = 0; i < 20; i++) await Promise.resolve();
    }
    tap?.end(true);
    return { status, upstreamStatus: status, replayed: false, result: 'complete' };
  }
  return { calls, refreshes, forward };
}

const SETTINGS: CacheSettings = {
  rules: [{ prefix: '/v1.0/contracts/', ttlSeconds: 60 }],
  maxBytes: 64 * 1024,
  maxEntryBytes: 1024,
  maxEntries: 10_000,
  ...NO_STALE,
};

let metrics: SidecarMetrics;

function cacheWith(
  answers: Answer[],
  settings: Partial<CacheSettings> = {},
  maxWaiters?: number,
  shared?: SharedCacheEntries,
) {
  const cache = createResponseCache({
    settings: { ...SETTINGS, ...settings },
    clock: systemClock,
    metrics,
    maxWaiters,
    shared,
  });
  const { calls, refreshes, forward } = harness(cache, answers);
  const get = async (url: string, headers: Record<string, string> = {}, method = 'GET') => {
    const res = new FakeResponse();
    const outcome = await forward(url, headers, method, res);
    return { res, outcome };
  };
  /** A request whose response the test holds, to close it mid-way. */
  const start = (url: string, res: FakeResponse) => forward(url, {}, 'GET', res);
  return { cache, calls, refreshes, get, start };
}

async function count(result: string): Promise<number> {
  const metric = await metrics.registry
    .getSingleMetric('oauth_sidecar_cache_requests_total')
    ?.get();
  return metric?.values.find((v) => v.labels.result === result)?.value ?? 0;
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

describe('response cache', () => {
  it('leaves paths outside every rule alone: no Cache-Status, nothing stored', async () => {
    const { calls, get } = cacheWith([{ chunks: ['a'] }, { chunks: ['b'] }]);
    const first = await get('/v1.0/other/');
    const second = await get('/v1.0/other/');
    expect(second.res.body).toBe('b');
    expect(first.res.headers['cache-status']).toBeUndefined();
    expect(calls).toEqual(['/v1.0/other/', '/v1.0/other/']);
    expect(await count('miss')).toBe(0);
  });

  it('stores a 200 GET and serves it with Age and Cache-Status; HEAD is served from it', async () => {
    const { calls, get, cache } = cacheWith([
      { headers: { 'content-type': 'application/json' }, chunks: ['{"a":', '1}'] },
    ]);
    const miss = await get('/v1.0/contracts/?x=1');
    expect(miss.res.headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss; stored');
    expect(miss.res.headers.age).toBeUndefined();
    vi.advanceTimersByTime(2_500);
    const hit = await get('/v1.0/contracts/?x=1');
    expect(hit.res.status).toBe(200);
    expect(hit.res.body).toBe('{"a":1}');
    expect(hit.res.headers).toMatchObject({
      age: '2',
      'cache-status': 'oauth-sidecar; hit',
      'content-length': '7',
      'content-type': 'application/json',
      'x-request-id': 'r2',
    });
    const head = await get('/v1.0/contracts/?x=1', {}, 'HEAD');
    expect(head.res.headers['content-length']).toBe('7');
    expect(head.res.body).toBe('');
    expect(calls).toHaveLength(1);
    expect(cache.stats()).toMatchObject({ entries: 1, rules: 1 });
    expect(await count('hit')).toBe(2);
    expect(await count('miss')).toBe(1);
  });

  it('keys on the raw query, Accept and Accept-Encoding', async () => {
    const { calls, get } = cacheWith([]);
    await get('/v1.0/contracts/?a=1');
    await get('/v1.0/contracts/?a=%31');
    const csv = await get('/v1.0/contracts/?a=1', { accept: 'text/csv' });
    await get('/v1.0/contracts/?a=1', { 'accept-encoding': 'gzip' });
    expect(calls).toHaveLength(4);
    expect(csv.res.headers['cache-status']).toBe('oauth-sidecar; fwd=miss; stored');
    expect((await get('/v1.0/contracts/?a=1', { accept: 'text/csv' })).res.headers).toMatchObject({
      'cache-status': 'oauth-sidecar; hit',
    });
    expect(calls).toHaveLength(4);
  });

  it("adds the answer's Vary fields to the key and never stores Vary: *", async () => {
    const { calls, get } = cacheWith([
      { headers: { vary: 'Accept-Language' }, chunks: ['en'] },
      { headers: { vary: 'Accept-Language' }, chunks: ['de'] },
      { headers: { vary: '*' }, chunks: ['star'] },
    ]);
    await get('/v1.0/contracts/', { 'accept-language': 'en' });
    await get('/v1.0/contracts/', { 'accept-language': 'de' });
    expect((await get('/v1.0/contracts/', { 'accept-language': 'en' })).res.body).toBe('en');
    expect((await get('/v1.0/contracts/', { 'accept-language': 'de' })).res.body).toBe('de');
    expect(calls).toHaveLength(2);
    const star = await get('/v1.0/contracts/', { 'accept-language': 'fr' });
    expect(star.res.headers['cache-status']).toBe('oauth-sidecar; fwd=vary-miss');
    await get('/v1.0/contracts/', { 'accept-language': 'fr' });
    expect(calls).toHaveLength(4);
  });

  it('honours no-store both ways and no-cache as a refresh', async () => {
    const { calls, get } = cacheWith([
      { headers: { 'cache-control': 'no-store' }, chunks: ['1'] },
      { chunks: ['2'] },
      { chunks: ['3'] },
      { chunks: ['4'] },
    ]);
    await get('/v1.0/contracts/');
    const second = await get('/v1.0/contracts/');
    expect(second.res.body).toBe('2');
    const bypass = await get('/v1.0/contracts/', { 'cache-control': 'no-store' });
    expect(bypass.res.body).toBe('3');
    expect(bypass.res.headers['cache-status']).toBe('oauth-sidecar; fwd=bypass');
    expect((await get('/v1.0/contracts/')).res.body).toBe('2');
    const refresh = await get('/v1.0/contracts/', { pragma: 'no-cache' });
    expect(refresh.res.headers['cache-status']).toBe('oauth-sidecar; fwd=request; stored');
    expect((await get('/v1.0/contracts/')).res.body).toBe('4');
    expect(calls).toHaveLength(4);
    expect(await count('bypass')).toBe(1);
  });

  it("lives for the smaller of the rule's TTL and max-age; a stale entry is fetched again", async () => {
    const { calls, get } = cacheWith([
      { headers: { 'cache-control': 'max-age=5' }, chunks: ['1'] },
      { chunks: ['2'] },
    ]);
    await get('/v1.0/contracts/');
    vi.advanceTimersByTime(4_999);
    expect((await get('/v1.0/contracts/')).res.body).toBe('1');
    vi.advanceTimersByTime(1);
    const stale = await get('/v1.0/contracts/');
    expect(stale.res.headers['cache-status']).toBe('oauth-sidecar; fwd=stale; stored');
    vi.advanceTimersByTime(59_999);
    expect((await get('/v1.0/contracts/')).res.body).toBe('2');
    vi.advanceTimersByTime(1);
    await get('/v1.0/contracts/');
    expect(calls).toHaveLength(3);
  });

  it('stores nothing but 200 answers to GET, and invalidates a path after a 2xx unsafe method', async () => {
    const { calls, get } = cacheWith([
      { status: 404, chunks: ['nf'] },
      { status: 201, chunks: ['created'] },
      { chunks: ['list'] },
      { chunks: ['page2'] },
      { status: 204 },
      { chunks: ['list2'] },
    ]);
    const notFound = await get('/v1.0/contracts/');
    expect(notFound.res.headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss');
    const post = await get('/v1.0/contracts/', {}, 'POST');
    expect(post.res.headers['cache-status']).toBe('oauth-sidecar; fwd=method');
    await get('/v1.0/contracts/');
    expect((await get('/v1.0/contracts/?page=2')).res.body).toBe('page2');
    expect((await get('/v1.0/contracts/')).res.body).toBe('list');
    await get('/v1.0/contracts/', {}, 'DELETE');
    expect((await get('/v1.0/contracts/')).res.body).toBe('list2');
    expect((await get('/v1.0/contracts/?page=2')).res.headers['cache-status']).toMatch(
      /fwd=uri-miss/,
    );
    expect(calls).toHaveLength(7);
  });

  it('does not store an answer over maxEntryBytes, declared or streamed, and passes it whole', async () => {
    const big = 'x'.repeat(600);
    const { calls, get, cache } = cacheWith([
      { headers: { 'content-length': '2000' }, chunks: [big, big, 'y'.repeat(800)] },
      { chunks: [big, big] },
      { chunks: [big, big] },
    ]);
    const declared = await get('/v1.0/contracts/');
    expect(declared.res.headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss');
    const streamed = await get('/v1.0/contracts/');
    expect(streamed.res.body).toBe(big + big);
    await get('/v1.0/contracts/');
    expect(calls).toHaveLength(3);
    expect(cache.stats()).toMatchObject({ entries: 0, bytes: 0 });
  });

  it('evicts the least recently used entries beyond maxBytes and reports the bytes', async () => {
    const body = 'b'.repeat(700);
    const answers = Array.from({ length: 10 }, () => ({ chunks: [body] }));
    const inner = cacheWith(answers, { maxBytes: 5_000 });
    await inner.get('/v1.0/contracts/1');
    await inner.get('/v1.0/contracts/2');
    await inner.get('/v1.0/contracts/3');
    expect(inner.cache.stats().entries).toBe(3);
    await inner.get('/v1.0/contracts/1'); // 1 is now the most recent: 2 goes first
    await inner.get('/v1.0/contracts/4');
    expect(inner.cache.stats().entries).toBe(3);
    expect(inner.cache.stats().bytes).toBeLessThanOrEqual(5_000);
    expect((await inner.get('/v1.0/contracts/1')).res.headers['cache-status']).toBe(
      'oauth-sidecar; hit',
    );
    expect((await inner.get('/v1.0/contracts/2')).res.headers['cache-status']).toMatch(/fwd=/);
    expect(inner.calls).toHaveLength(5);
    const gauge = await metrics.registry.getSingleMetric('oauth_sidecar_cache_bytes')?.get();
    expect(gauge?.values[0]?.value).toBe(inner.cache.stats().bytes);
  });
});

describe('coalescing', () => {
  function gate() {
    let open!: () => void;
    const promise = new Promise<void>((resolve) => (open = resolve));
    return { promise, open };
  }

  it('identical GETs in flight share one upstream answer', async () => {
    const g = gate();
    const { calls, get } = cacheWith([{ gate: g.promise, chunks: ['shared'] }]);
    const all = Array.from({ length: 20 }, () => get('/v1.0/contracts/'));
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    g.open();
    const answers = await Promise.all(all);
    expect(answers.map((a) => a.res.body)).toEqual(Array(20).fill('shared'));
    expect(calls).toHaveLength(1);
    expect(await count('coalesced')).toBe(19);
    expect(await count('miss')).toBe(1);
  });

  it("waiters are served from the leader's answer whatever the order of close and capture end", async () => {
    const g = gate();
    const { calls, get } = cacheWith([{ gate: g.promise, chunks: ['shared'], closeFirst: true }]);
    const all = Array.from({ length: 4 }, () => get('/v1.0/contracts/'));
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    g.open();
    const answers = await Promise.all(all);
    expect(answers.map((a) => a.res.body)).toEqual(Array(4).fill('shared'));
    expect(calls).toHaveLength(1);
  });

  it('when the leader fails, each waiter goes upstream on its own', async () => {
    const g = gate();
    const { calls, get } = cacheWith([
      { gate: g.promise, fail: new SidecarError('upstream_unreachable', 'down') },
      { status: 500, chunks: ['e1'] },
      { status: 500, chunks: ['e2'] },
    ]);
    const leader = get('/v1.0/contracts/');
    const waiters = [get('/v1.0/contracts/'), get('/v1.0/contracts/')];
    g.open();
    await expect(leader).rejects.toThrow('down');
    const answers = await Promise.all(waiters);
    expect(answers.map((a) => a.res.status)).toEqual([500, 500]);
    expect(calls).toHaveLength(3);
  });

  it('a waiter whose client leaves is dropped at once', async () => {
    const g = gate();
    const { calls, get, start } = cacheWith([{ gate: g.promise, chunks: ['late'] }]);
    const leader = get('/v1.0/contracts/');
    const leaving = new FakeResponse();
    const pending = start('/v1.0/contracts/', leaving);
    leaving.leave();
    await expect(pending).resolves.toMatchObject({ status: 499, result: 'client_closed' });
    expect(leaving.status).toBe(0);
    g.open();
    expect((await leader).res.body).toBe('late');
    expect(calls).toHaveLength(1);
  });

  it('when the leader fails before any header, or its client leaves, waiters wake at once', async () => {
    const never = new Promise<void>(() => {});
    const { calls, get, start } = cacheWith([{ gate: never }, { chunks: ['own'] }]);
    const leaderRes = new FakeResponse();
    void start('/v1.0/contracts/', leaderRes);
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    const waiter = get('/v1.0/contracts/');
    await Promise.resolve();
    leaderRes.leave();
    expect((await waiter).res.body).toBe('own');
    expect(calls).toHaveLength(2);
  });

  it('at most maxWaiters wait; the next one goes upstream on its own', async () => {
    const g = gate();
    const { calls, get } = cacheWith([{ gate: g.promise, chunks: ['one'] }], {}, 2);
    const all = [1, 2, 3, 4].map(() => get('/v1.0/contracts/'));
    await vi.waitFor(() => expect(calls).toHaveLength(2));
    g.open();
    await Promise.all(all);
    expect(calls).toHaveLength(2);
  });
});

describe('stale answers (RFC 5861)', () => {
  const STALE = { staleIfErrorSeconds: 60, staleWhileRevalidateSeconds: 0 };
  const FIVE_SECONDS = { headers: { 'cache-control': 'max-age=5' }, chunks: ['good'] };

  it('stale-if-error: a 5xx from the API is answered with the stale entry, marked', async () => {
    const { calls, get } = cacheWith(
      [FIVE_SECONDS, { status: 503, chunks: ['maintenance'] }, { status: 500 }, { status: 504 }],
      STALE,
    );
    await get('/v1.0/contracts/');
    vi.advanceTimersByTime(7_000);
    const stale = await get('/v1.0/contracts/');
    expect(stale.outcome).toMatchObject({ status: 200, upstreamStatus: 503 });
    expect(stale.res.status).toBe(200);
    expect(stale.res.body).toBe('good');
    expect(stale.res.headers.age).toBe('7');
    expect(stale.res.headers['cache-status']).toBe(
      'oauth-sidecar; hit; ttl=-2; fwd=stale; fwd-status=503; detail=stale-if-error',
    );
    expect((await get('/v1.0/contracts/')).res.body).toBe('good');
    expect((await get('/v1.0/contracts/')).res.headers['cache-status']).toMatch(/fwd-status=504/);
    expect(calls).toHaveLength(4);
    expect(await count('stale')).toBe(3);
  });

  it('stale-if-error: requests waiting on a fill that failed answer stale too, without a request each', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { calls, get } = cacheWith([FIVE_SECONDS, { gate, status: 503 }], STALE);
    await get('/v1.0/contracts/');
    vi.advanceTimersByTime(6_000);
    const pending = Array.from({ length: 5 }, () => get('/v1.0/contracts/'));
    release();
    const answers = await Promise.all(pending);
    expect(answers.map((a) => a.res.body)).toEqual(['good', 'good', 'good', 'good', 'good']);
    for (const answer of answers) {
      expect(answer.res.headers['cache-status']).toMatch(
        /fwd=stale; fwd-status=503; detail=stale-if-error$/,
      );
    }
    expect(calls).toHaveLength(2);
  });

  it('stale-if-error: unreachable, timeout, cooldown and no token are answered with it too', async () => {
    const errors = [
      new SidecarError('upstream_unreachable', 'down'),
      new SidecarError('upstream_timeout', 'slow'),
      new SidecarError('upstream_unavailable', 'cooldown', { retryAfterSeconds: 30 }),
      new SidecarError('upstream_rate_limited', 'cooldown', { retryAfterSeconds: 30 }),
      new SidecarError('token_unavailable', 'no token'),
    ];
    const { get } = cacheWith([FIVE_SECONDS, ...errors.map((fail) => ({ fail }))], STALE);
    await get('/v1.0/contracts/');
    vi.advanceTimersByTime(6_000);
    const marks = [];
    for (const _ of errors) {
      const stale = await get('/v1.0/contracts/');
      expect(stale.outcome.status).toBe(200);
      expect(stale.res.body).toBe('good');
      marks.push(stale.res.headers['cache-status']);
    }
    expect(marks).toEqual([
      'oauth-sidecar; hit; ttl=-1; fwd=stale; detail=stale-if-error',
      'oauth-sidecar; hit; ttl=-1; fwd=stale; detail=stale-if-error',
      'oauth-sidecar; hit; ttl=-1; detail=stale-if-error',
      'oauth-sidecar; hit; ttl=-1; detail=stale-if-error',
      'oauth-sidecar; hit; ttl=-1; detail=stale-if-error',
    ]);
  });

  it('passes the error past the window, for other errors, and to a client asking for no-cache', async () => {
    const { get } = cacheWith(
      [
        FIVE_SECONDS,
        { fail: new SidecarError('rate_limited', 'queue full', { retryAfterSeconds: 1 }) },
        { status: 404 },
        { status: 503 },
        { status: 503 },
      ],
      STALE,
    );
    await get('/v1.0/contracts/');
    vi.advanceTimersByTime(6_000);
    await expect(get('/v1.0/contracts/')).rejects.toMatchObject({ code: 'rate_limited' });
    expect((await get('/v1.0/contracts/')).res.status).toBe(404);
    expect((await get('/v1.0/contracts/', { 'cache-control': 'no-cache' })).res.status).toBe(503);
    vi.advanceTimersByTime(60_000); // 65 s after it was stored: 60 s past its freshness
    const past = await get('/v1.0/contracts/');
    expect(past.res.status).toBe(503);
    expect(await count('stale')).toBe(0);
  });

  it("narrows the window to the answer's own stale-if-error; must-revalidate and s-maxage allow none", async () => {
    const { get } = cacheWith(
      [
        { headers: { 'cache-control': 'max-age=5, stale-if-error=10' }, chunks: ['a'] },
        { status: 503 },
        { status: 503 },
      ],
      STALE,
    );
    await get('/v1.0/contracts/a');
    vi.advanceTimersByTime(14_000);
    expect((await get('/v1.0/contracts/a')).res.body).toBe('a');
    vi.advanceTimersByTime(2_000);
    expect((await get('/v1.0/contracts/a')).res.status).toBe(503);
    for (const cacheControl of [
      'max-age=5, must-revalidate',
      's-maxage=5',
      'max-age=5, proxy-revalidate',
    ]) {
      const strict = cacheWith(
        [{ headers: { 'cache-control': cacheControl }, chunks: ['b'] }, { status: 503 }],
        STALE,
      );
      await strict.get('/v1.0/contracts/b');
      vi.advanceTimersByTime(6_000);
      expect((await strict.get('/v1.0/contracts/b')).res.status).toBe(503);
    }
    // ...unless the answer grants the window itself (RFC 5861: the origin's explicit leave).
    const granted = cacheWith(
      [
        { headers: { 'cache-control': 's-maxage=5, stale-if-error=30' }, chunks: ['c'] },
        { status: 502 },
      ],
      STALE,
    );
    await granted.get('/v1.0/contracts/c');
    vi.advanceTimersByTime(6_000);
    expect((await granted.get('/v1.0/contracts/c')).res.body).toBe('c');
  });

  it('stale-while-revalidate: answers at once, sends exactly one refresh, then serves its answer', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { calls, refreshes, get } = cacheWith(
      [FIVE_SECONDS, { gate, headers: { 'cache-control': 'max-age=5' }, chunks: ['newer'] }],
      { staleIfErrorSeconds: 0, staleWhileRevalidateSeconds: 30 },
    );
    await get('/v1.0/contracts/');
    vi.advanceTimersByTime(8_000);
    // The refresh is held upstream (gate): every answer meanwhile is the stale entry, at once.
    const answers = await Promise.all(Array.from({ length: 5 }, () => get('/v1.0/contracts/')));
    for (const answer of answers) {
      expect(answer.res.body).toBe('good');
      expect(answer.res.headers['cache-status']).toBe(
        'oauth-sidecar; hit; ttl=-3; detail=stale-while-revalidate',
      );
    }
    expect(refreshes).toEqual(['/v1.0/contracts/']);
    expect(calls).toHaveLength(2);
    expect(await count('stale')).toBe(5);
    release();
    await vi.waitFor(async () => {
      expect((await get('/v1.0/contracts/')).res.body).toBe('newer');
    });
    expect(calls).toHaveLength(2);
    // Past the window the entry is a plain miss again.
    vi.advanceTimersByTime(40_000);
    expect((await get('/v1.0/contracts/')).res.headers['cache-status']).toMatch(
      /fwd=stale; stored/,
    );
    expect(refreshes).toHaveLength(1);
  });

  it(`stale-while-revalidate: at most ${MAX_REFRESHES} refreshes at once; beyond, stale answers without one`, async () => {
    const never = new Promise<void>(() => undefined);
    const keys = MAX_REFRESHES + 1;
    const fills = Array.from({ length: keys }, () => FIVE_SECONDS);
    const held = Array.from({ length: keys }, () => ({ gate: never }));
    const { refreshes, get } = cacheWith([...fills, ...held], {
      staleIfErrorSeconds: 0,
      staleWhileRevalidateSeconds: 30,
    });
    for (let i = 0; i < keys; i++) await get(`/v1.0/contracts/${i}`);
    vi.advanceTimersByTime(6_000);
    for (let i = 0; i < keys; i++) {
      const stale = await get(`/v1.0/contracts/${i}`);
      expect(stale.res.headers['cache-status']).toMatch(/detail=stale-while-revalidate$/);
    }
    expect(refreshes).toHaveLength(MAX_REFRESHES);
    expect((await get(`/v1.0/contracts/${keys - 1}`)).res.body).toBe('good');
    expect(refreshes).toHaveLength(MAX_REFRESHES);
  });

  it('a refresh that fails before any answer leaves no fill behind for others to wait on', async () => {
    const { calls, refreshes, get } = cacheWith(
      [
        FIVE_SECONDS,
        { fail: new SidecarError('rate_limited', 'no slot', { retryAfterSeconds: 1 }) },
        { chunks: ['fetched'] },
      ],
      { staleIfErrorSeconds: 0, staleWhileRevalidateSeconds: 30 },
    );
    await get('/v1.0/contracts/');
    vi.advanceTimersByTime(6_000);
    expect((await get('/v1.0/contracts/')).res.body).toBe('good'); // stale; its refresh fails
    await vi.waitFor(() => expect(calls).toHaveLength(2));
    expect(refreshes).toHaveLength(1);
    vi.advanceTimersByTime(31_000); // past the window: a plain miss, not a wait on the refresh
    expect((await get('/v1.0/contracts/')).res.body).toBe('fetched');
  });
});

describe("the fleet's tier: what the leader of a local miss does with the store's read", () => {
  const ENTRY: SharedAnswer = {
    headers: { 'content-length': '5' },
    body: Buffer.from('fleet'),
    freshMs: 60_000,
    staleIfErrorMs: 0,
    staleWhileRevalidateMs: 30_000,
    vary: [],
    varyValues: [],
  };

  const store = sharedStorePort;
  const SHARED = { shared: true, staleWhileRevalidateSeconds: 30 };
  const read = (r: Partial<SharedRead>): SharedRead => ({
    answer: undefined,
    ageMs: 0,
    generation: '4',
    lease: 'none',
    ...r,
  });

  it("the fleet's fresh entry answers without the API and is kept in the local tier", async () => {
    const { port, log } = store([read({ answer: ENTRY, ageMs: 2_000 })]);
    const { calls, get } = cacheWith([], SHARED, undefined, port);
    const first = await get('/v1.0/contracts/a');
    expect(first.res.body).toBe('fleet');
    expect(first.res.headers).toMatchObject({ age: '2', 'cache-status': 'oauth-sidecar; hit' });
    const second = await get('/v1.0/contracts/a');
    expect(second.res.body).toBe('fleet');
    expect(calls).toEqual([]);
    expect(log).toEqual(['read /v1.0/contracts/a']);
    expect(await count('hit')).toBe(2);
  });

  it('holding the lease, the leader asks the API and writes the answer under the generation read', async () => {
    const { port, log } = store([read({ lease: 'taken', generation: '7' })]);
    const { calls, get } = cacheWith([{ chunks: ['api'] }], SHARED, undefined, port);
    expect((await get('/v1.0/contracts/a')).res.body).toBe('api');
    expect(calls).toEqual(['/v1.0/contracts/a']);
    expect(log).toEqual(['read /v1.0/contracts/a', 'write /v1.0/contracts/a api @7']);
  });

  it('a failing store is a miss: this process asks the API alone and keeps the answer locally', async () => {
    const { port, log } = store([new Error('store down')]);
    const { calls, get } = cacheWith([{ chunks: ['api'] }], SHARED, undefined, port);
    expect((await get('/v1.0/contracts/a')).res.body).toBe('api');
    expect((await get('/v1.0/contracts/a')).res.body).toBe('api');
    expect(calls).toHaveLength(1);
    expect(log).toEqual(['read /v1.0/contracts/a']);
  });

  it("the fleet's stale entry answers at once; holding the lease, this process sends the one refresh", async () => {
    const stale = read({ answer: ENTRY, ageMs: 70_000, lease: 'taken', generation: '9' });
    const { port, log } = store([stale]);
    const { calls, refreshes, get } = cacheWith([{ chunks: ['new'] }], SHARED, undefined, port);
    const answer = await get('/v1.0/contracts/a');
    expect(answer.res.body).toBe('fleet');
    expect(answer.res.headers['cache-status']).toBe(
      'oauth-sidecar; hit; ttl=-10; detail=stale-while-revalidate',
    );
    await vi.waitFor(() => expect(calls).toEqual(['/v1.0/contracts/a']));
    expect(refreshes).toEqual(['/v1.0/contracts/a']);
    await vi.waitFor(() => expect(log).toContain('write /v1.0/contracts/a new @9'));
    expect(log).not.toContain('release /v1.0/contracts/a');
  });

  it("another member's lease and its stale entry: answers stale, no refresh of its own", async () => {
    const { port, log } = store([read({ answer: ENTRY, ageMs: 70_000, lease: 'held' })]);
    const { calls, refreshes, get } = cacheWith([], SHARED, undefined, port);
    expect((await get('/v1.0/contracts/a')).res.body).toBe('fleet');
    expect(refreshes).toEqual([]);
    expect(calls).toEqual([]);
    expect(log).toEqual(['read /v1.0/contracts/a']);
  });
});
