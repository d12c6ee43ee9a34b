/**
 * The response cache through the real proxy stack (node server, Hono app, forwarder, undici)
 * against a real HTTPS origin on 127.0.0.1:0 (docs/response-cache.md). The origin's answer
 * is steered by the query string, so each test owns its URLs (the query is part of the key).
 */
import { createMetricsRegistry } from '../src/telemetry/exposition.js';
import { createHash } from 'node:crypto';
import { connect as connectH2, constants, type ClientHttp2Session } from 'node:http2';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenUnavailableError } from '../src/errors.js';
import type { ResponseCache } from '../src/proxy/cache/cache-contract.js';
import { createResponseCache } from '../src/proxy/cache/response-cache.js';
import { createMetrics } from '../src/telemetry/metrics.js';
import { createTestPki, startStandin, type Standin, type TestPki } from '../src/standin/index.js';
import { startSidecarProcess, waitReady, writeTemp } from './helpers/sidecar-process.js';
import { counterValue, startStack, type Stack } from './proxy-stack.js';

/** These tests are about fresh entries; stale answers have their own (stale-answers tests). */
const NO_STALE = {
  shared: false,
  maxSharedEntryBytes: 256 * 1024,
  staleIfErrorSeconds: 0,
  staleWhileRevalidateSeconds: 0,
};

interface OriginRequest {
  method: string;
  url: string;
  authorization: string | undefined;
}

let pki: TestPki;
let standin: Standin;
let origin: Server;
let originUrl: string;
const seen: OriginRequest[] = [];
const client = new Agent({ connections: 64 });

/** Skew added to the cache's clock, so Age and lifetimes are tested without sleeping. */
let skewMs = 0;
const cacheClock = { now: () => Date.now() + skewMs };

const ENTRY_LIMIT = 16 * 1024;
const TOTAL_LIMIT = 64 * 1024;

/**
 * Query parameters of the origin: `status`, `cc` (Cache-Control), `age`, `vary`, `size` (body bytes of
 * `x`, sent chunked unless `length=1`), `delay` (ms before the headers), `hold` (no headers until
 * the test calls {@link release} with the same name), `reset` (destroy the socket of the first
 * request to this URL). The default body names the URL, how many times the
 * origin saw it, and the request's Accept and Accept-Language.
 */
const held = new Map<string, (() => void)[]>();
const released = new Set<string>();

/** Answers the requests the origin holds under `hold=name`, and any that come later at once. */
function release(name: string): void {
  released.add(name);
  for (const answer of held.get(name) ?? []) answer();
  held.delete(name);
}

function startOrigin(): Promise<void> {
  const counts = new Map<string, number>();
  origin = createServer({ key: pki.serverKey, cert: pki.serverCert }, (req, res) => {
    const url = req.url ?? '/';
    seen.push({ method: req.method ?? '', url, authorization: req.headers.authorization });
    const n = (counts.get(url) ?? 0) + 1;
    counts.set(url, n);
    const q = new URL(url, 'https://origin').searchParams;
    if (q.get('reset') === 'first' && n === 1) {
      req.socket.destroy();
      return;
    }
    const answer = () => {
      const headers: Record<string, string> = {};
      if (q.get('cc')) headers['cache-control'] = q.get('cc')!;
      if (q.get('vary')) headers.vary = q.get('vary')!;
      if (q.get('cs')) headers['cache-status'] = q.get('cs')!;
      if (q.get('age')) headers.age = q.get('age')!;
      if (q.get('cookie')) headers['set-cookie'] = `session=${q.get('cookie')}-${n}`;
      if (q.get('expires') === 'past')
        headers.expires = new Date(Date.now() - 60_000).toUTCString();
      const size = Number(q.get('size') ?? -1);
      const body =
        size >= 0
          ? Buffer.alloc(size, 'x')
          : Buffer.from(
              JSON.stringify({
                url,
                n,
                accept: req.headers.accept ?? null,
                lang: req.headers['accept-language'] ?? null,
              }),
            );
      headers['content-type'] = size >= 0 ? 'application/octet-stream' : 'application/json';
      if (size < 0 || q.get('length') === '1') headers['content-length'] = String(body.length);
      res.writeHead(Number(q.get('status') ?? 200), headers);
      if (req.method === 'HEAD') {
        res.end();
        return;
      }
      // Several writes, so a chunked answer really arrives in pieces.
      for (let at = 0; at < body.length; at += 4096) res.write(body.subarray(at, at + 4096));
      res.end();
    };
    const delay = Number(q.get('delay') ?? 0);
    const hold = q.get('hold');
    if (hold && !released.has(hold)) held.set(hold, [...(held.get(hold) ?? []), answer]);
    else if (delay > 0) setTimeout(answer, delay);
    else answer();
  });
  return new Promise((resolve) =>
    origin.listen(0, '127.0.0.1', () => {
      originUrl = `https://127.0.0.1:${(origin.address() as AddressInfo).port}`;
      resolve();
    }),
  );
}

let stack: Stack;
let cache: ResponseCache;
const cacheMetrics = createMetrics({
  registry: createMetricsRegistry(),
  defaultMetrics: false,
});

beforeAll(async () => {
  pki = await createTestPki();
  standin = await startStandin({ pki });
  await startOrigin();
  cache = createResponseCache({
    settings: {
      rules: [
        { prefix: '/v1.0/cached/', ttlSeconds: 60 },
        { prefix: '/v1.0/cached/short/', ttlSeconds: 3 },
      ],
      maxBytes: TOTAL_LIMIT,
      maxEntryBytes: ENTRY_LIMIT,
      maxEntries: 10_000,
      ...NO_STALE,
    },
    clock: cacheClock,
    metrics: cacheMetrics,
  });
  stack = await startStack(standin, { upstream: originUrl, cache });
});

afterAll(async () => {
  await stack.close();
  await client.close();
  await new Promise((resolve) => origin.close(resolve));
  await standin.close();
});

async function get(
  path: string,
  headers: Record<string, string> = {},
  method: 'GET' | 'HEAD' | 'POST' | 'DELETE' = 'GET',
  signal?: AbortSignal,
) {
  const res = await request(`${stack.url}${path}`, {
    dispatcher: client,
    headers,
    method,
    signal,
  });
  const body = Buffer.from(await res.body.arrayBuffer());
  const h = res.headers as Record<string, string | undefined>;
  return { status: res.statusCode, headers: h, body, text: body.toString() };
}

function originSaw(path: string): number {
  return seen.filter((r) => r.url === path).length;
}

const metric = (result: string) =>
  counterValue(cacheMetrics, 'oauth_sidecar_cache_requests_total', { result });

describe('response cache through the proxy', () => {
  it('a miss is fetched and stored, then served with Age and Cache-Status without upstream or token', async () => {
    const path = '/v1.0/cached/hit?case=1';
    const miss = await get(path);
    expect(miss.status).toBe(200);
    expect(miss.headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss; stored');
    expect(miss.headers.age).toBeUndefined();
    expect(seen.at(-1)?.authorization).toMatch(/^Bearer /);

    skewMs += 7_000;
    // No token can be had now: a hit must not need one.
    stack.tokens.failure = new TokenUnavailableError('no token', 1);
    try {
      const hit = await get(path);
      expect(hit.status).toBe(200);
      expect(hit.text).toBe(miss.text);
      expect(hit.headers['cache-status']).toBe('oauth-sidecar; hit');
      expect(hit.headers.age).toBe('7');
      expect(hit.headers['content-length']).toBe(String(miss.body.length));
      expect(hit.headers['x-request-id']).toBeDefined();
      expect(hit.headers['x-request-id']).not.toBe(miss.headers['x-request-id']);
    } finally {
      stack.tokens.failure = undefined;
    }
    expect(originSaw(path)).toBe(1);
  });

  it("appends its Cache-Status member after the upstream's own", async () => {
    const path = '/v1.0/cached/cs?cs=upstream-cache%3B%20hit';
    const miss = await get(path);
    expect(miss.headers['cache-status']).toBe(
      'upstream-cache; hit, oauth-sidecar; fwd=uri-miss; stored',
    );
    const hit = await get(path);
    expect(hit.headers['cache-status']).toBe('upstream-cache; hit, oauth-sidecar; hit');
  });

  it('HEAD is served from a stored GET answer', async () => {
    const path = '/v1.0/cached/head?case=1';
    const miss = await get(path);
    const head = await get(path, {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['cache-status']).toBe('oauth-sidecar; hit');
    expect(head.headers['content-length']).toBe(String(miss.body.length));
    expect(head.body.length).toBe(0);
    expect(originSaw(path)).toBe(1);
  });

  it('keys on Accept and on the fields the answer varies on', async () => {
    const path = '/v1.0/cached/variants?vary=Accept-Language';
    const csv = await get(path, { accept: 'text/csv', 'accept-language': 'en' });
    const json = await get(path, { accept: 'application/json', 'accept-language': 'en' });
    const de = await get(path, { accept: 'application/json', 'accept-language': 'de' });
    expect(json.headers['cache-status']).toBe('oauth-sidecar; fwd=miss; stored');
    expect(de.headers['cache-status']).toBe('oauth-sidecar; fwd=vary-miss; stored');
    expect(originSaw(path)).toBe(3);
    const again = await Promise.all([
      get(path, { accept: 'text/csv', 'accept-language': 'en' }),
      get(path, { accept: 'application/json', 'accept-language': 'en' }),
      get(path, { accept: 'application/json', 'accept-language': 'de' }),
    ]);
    expect(again.map((a) => a.text)).toEqual([csv.text, json.text, de.text]);
    expect(again.map((a) => a.headers['cache-status'])).toEqual(
      Array(3).fill('oauth-sidecar; hit'),
    );
    expect(JSON.parse(de.text)).toMatchObject({ lang: 'de', accept: 'application/json' });
    expect(originSaw(path)).toBe(3);
  });

  it('never stores Vary: *', async () => {
    const path = '/v1.0/cached/star?vary=*';
    await get(path);
    const second = await get(path);
    expect(second.headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss');
    expect(originSaw(path)).toBe(2);
  });

  it('no-store in the answer is never stored', async () => {
    const path = '/v1.0/cached/nostore?cc=no-store';
    const first = await get(path);
    expect(first.headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss');
    await get(path);
    expect(originSaw(path)).toBe(2);
  });

  it('no-store in the request bypasses the cache both ways', async () => {
    const path = '/v1.0/cached/bypass?case=1';
    const stored = await get(path);
    const bypass = await get(path, { 'cache-control': 'no-store' });
    expect(bypass.headers['cache-status']).toBe('oauth-sidecar; fwd=bypass');
    expect(JSON.parse(bypass.text)).toMatchObject({ n: 2 });
    // The bypassing answer did not replace the entry.
    expect((await get(path)).text).toBe(stored.text);
    const fresh = '/v1.0/cached/bypass?case=2';
    await get(fresh, { 'cache-control': 'no-store' });
    expect((await get(fresh)).headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss; stored');
    expect(originSaw(path)).toBe(2);
  });

  it('no-cache (and Pragma: no-cache) goes upstream and refreshes the entry', async () => {
    const path = '/v1.0/cached/refresh?case=1';
    await get(path);
    const refreshed = await get(path, { 'cache-control': 'no-cache' });
    expect(refreshed.headers['cache-status']).toBe('oauth-sidecar; fwd=request; stored');
    expect(JSON.parse(refreshed.text)).toMatchObject({ n: 2 });
    expect(JSON.parse((await get(path)).text)).toMatchObject({ n: 2 });
    await get(path, { pragma: 'no-cache' });
    expect(JSON.parse((await get(path)).text)).toMatchObject({ n: 3 });
    expect(originSaw(path)).toBe(3);
  });

  it("an answer's max-age shorter than the rule wins; so does a more specific rule", async () => {
    const path = '/v1.0/cached/maxage?cc=max-age%3D2';
    await get(path);
    skewMs += 1_900;
    expect((await get(path)).headers['cache-status']).toBe('oauth-sidecar; hit');
    skewMs += 200;
    const stale = await get(path);
    expect(stale.headers['cache-status']).toBe('oauth-sidecar; fwd=stale; stored');
    expect(originSaw(path)).toBe(2);

    const short = '/v1.0/cached/short/x';
    await get(short);
    skewMs += 2_900;
    expect((await get(short)).headers['cache-status']).toBe('oauth-sidecar; hit');
    skewMs += 200;
    await get(short);
    expect(originSaw(short)).toBe(2);
  });

  it("the API's Age counts (RFC 9111 §4.2.3): freshness is max-age less Age, and hits report the age reached", async () => {
    const path = '/v1.0/cached/aged?cc=max-age%3D30&age=20';
    expect((await get(path)).headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss; stored');
    skewMs += 1_000;
    const hit = await get(path);
    expect(hit.headers['cache-status']).toBe('oauth-sidecar; hit');
    expect(Number(hit.headers.age)).toBeGreaterThanOrEqual(21);
    expect(Number(hit.headers.age)).toBeLessThanOrEqual(22);
    skewMs += 8_700;
    expect((await get(path)).headers['cache-status']).toBe('oauth-sidecar; hit');
    skewMs += 500;
    // 30 s old by now: stale, so the API is asked again.
    expect((await get(path)).headers['cache-status']).toBe('oauth-sidecar; fwd=stale; stored');
    expect(originSaw(path)).toBe(2);

    // Older than its max-age on arrival: never a hit.
    const old = '/v1.0/cached/aged?cc=max-age%3D60&age=100';
    await get(old);
    expect((await get(old)).headers['cache-status']).not.toBe('oauth-sidecar; hit');
    expect(originSaw(old)).toBe(2);
  });

  it('non-200 answers and other methods are never stored; a 2xx POST or DELETE invalidates its path', async () => {
    for (const status of [201, 203, 404, 500]) {
      const path = `/v1.0/cached/status?status=${status}`;
      const first = await get(path);
      expect(first.status).toBe(status);
      expect(first.headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss');
      await get(path);
      expect(originSaw(path)).toBe(2);
    }
    const posted = '/v1.0/cached/posted';
    const post = await get(posted, {}, 'POST');
    expect(post.headers['cache-status']).toBe('oauth-sidecar; fwd=method');
    await get(posted, {}, 'POST');
    expect(seen.filter((r) => r.url === posted && r.method === 'POST')).toHaveLength(2);

    const list = '/v1.0/cached/items/';
    await get(list);
    await get(`${list}?page=2`);
    expect((await get(list)).headers['cache-status']).toBe('oauth-sidecar; hit');
    await get(list, {}, 'DELETE');
    expect((await get(list)).headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss; stored');
    expect((await get(`${list}?page=2`)).headers['cache-status']).toMatch(/^oauth-sidecar; fwd=/);
    // A failed unsafe request changes nothing.
    await get(`${list}?status=500`, {}, 'POST');
    expect((await get(list)).headers['cache-status']).toBe('oauth-sidecar; hit');
  });

  it('paths outside every rule are never stored and carry no Cache-Status', async () => {
    const path = '/v1.0/plain/outside?case=1';
    const first = await get(path);
    await get(path);
    expect(first.headers['cache-status']).toBeUndefined();
    expect(originSaw(path)).toBe(2);
  });

  it('an answer larger than maxEntryBytes streams through whole and is not stored', async () => {
    for (const path of [
      `/v1.0/cached/large?size=${ENTRY_LIMIT + 1}`,
      `/v1.0/cached/large?size=${ENTRY_LIMIT + 1}&length=1`,
      `/v1.0/cached/large?size=${4 * TOTAL_LIMIT}`,
    ]) {
      const size = Number(new URL(path, 'http://x').searchParams.get('size'));
      const first = await get(path);
      expect(first.body.length).toBe(size);
      expect(createHash('sha256').update(first.body).digest('hex')).toBe(
        createHash('sha256').update(Buffer.alloc(size, 'x')).digest('hex'),
      );
      const second = await get(path);
      expect(second.headers['cache-status']).toMatch(/^oauth-sidecar; fwd=uri-miss/);
      expect(originSaw(path)).toBe(2);
    }
    const fits = `/v1.0/cached/large?size=${ENTRY_LIMIT}`;
    await get(fits);
    expect((await get(fits)).headers['cache-status']).toBe('oauth-sidecar; hit');
  });

  it('holds at most maxBytes, evicting the least recently used first', async () => {
    const size = 12 * 1024; // five of these (plus headers) exceed 64 KiB
    const paths = [1, 2, 3, 4, 5, 6].map((i) => `/v1.0/cached/lru/${i}?size=${size}`);
    for (const path of paths.slice(0, 4)) await get(path);
    // Touch the first: the second is now the least recently used.
    expect((await get(paths[0]!)).headers['cache-status']).toBe('oauth-sidecar; hit');
    await get(paths[4]!);
    await get(paths[5]!);
    expect(cache.stats().bytes).toBeLessThanOrEqual(TOTAL_LIMIT);
    expect((await get(paths[0]!)).headers['cache-status']).toBe('oauth-sidecar; hit');
    expect((await get(paths[5]!)).headers['cache-status']).toBe('oauth-sidecar; hit');
    expect((await get(paths[1]!)).headers['cache-status']).toMatch(/^oauth-sidecar; fwd=/);
    const bytes = await cacheMetrics.registry.getSingleMetric('oauth_sidecar_cache_bytes')?.get();
    expect(bytes?.values[0]?.value).toBe(cache.stats().bytes);
  });
});

describe('what is never stored or served (poisoning)', () => {
  it('a GET with a body neither reads nor writes the cache', async () => {
    const path = '/v1.0/cached/poison?case=body';
    const withBody = await request(`${stack.url}${path}`, {
      dispatcher: client,
      method: 'GET',
      body: 'delete-everything=true&x=1',
    });
    await withBody.body.text();
    expect(withBody.headers['cache-status']).toBe('oauth-sidecar; fwd=bypass');
    const plain = await get(path);
    expect(plain.headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss; stored');
    expect(originSaw(path)).toBe(2);
  });

  it('a GET with a method-override field is forwarded as it is and its answer not stored', async () => {
    for (const field of ['X-HTTP-Method-Override', 'X-HTTP-Method', 'X-Method-Override']) {
      const path = `/v1.0/cached/poison?case=override-${field}`;
      const overridden = await get(path, { [field]: 'DELETE' });
      expect(overridden.headers['cache-status']).toBe('oauth-sidecar; fwd=bypass');
      expect((await get(path)).headers['cache-status']).toBe('oauth-sidecar; fwd=uri-miss; stored');
      expect(originSaw(path)).toBe(2);
    }
  });

  it('answers with Set-Cookie, private, or an Expires already past are not stored', async () => {
    for (const query of ['cookie=abc', 'cc=private', 'cc=private%3D%22x%22', 'expires=past']) {
      const path = `/v1.0/cached/refused?${query}`;
      const first = await get(path);
      expect(first.headers['cache-status'], query).toBe('oauth-sidecar; fwd=uri-miss');
      const second = await get(path);
      expect(second.headers['cache-status'], query).toBe('oauth-sidecar; fwd=uri-miss');
      expect(originSaw(path), query).toBe(2);
    }
    // The second caller got its own cookie, not the first caller's session.
    const cookies = seen.filter((r) => r.url === '/v1.0/cached/refused?cookie=abc');
    expect(cookies).toHaveLength(2);
  });

  it('percent-encoded unreserved characters are one resource: lookups and invalidation alike', async () => {
    await get('/v1.0/cached/item/a');
    expect((await get('/v1.0/cached/item/%61')).headers['cache-status']).toBe('oauth-sidecar; hit');
    await get('/v1.0/cached/item/a', {}, 'POST');
    expect((await get('/v1.0/cached/item/%61')).headers['cache-status']).toMatch(/fwd=uri-miss/);
  });
});

describe('a fill belongs to the cache, not to its first requester', () => {
  const big = 900 * 1024;
  let fillStack: Stack;
  let fillCacheStats: () => { waiting: number };
  beforeAll(async () => {
    const fillCache = createResponseCache({
      settings: {
        rules: [{ prefix: '/v1.0/fill/', ttlSeconds: 60 }],
        maxBytes: 8 << 20,
        maxEntryBytes: 1 << 20,
        maxEntries: 10_000,
        ...NO_STALE,
      },
      clock: cacheClock,
      metrics: createMetrics({
        registry: createMetricsRegistry(),
        defaultMetrics: false,
      }),
      maxWaitMs: 10_000,
    });
    fillCacheStats = () => fillCache.stats();
    fillStack = await startStack(standin, {
      upstream: originUrl,
      http2: true,
      cache: fillCache,
    });
  });
  afterAll(async () => {
    await fillStack.close();
  });

  /** An h2 GET on `session`, read to its end. */
  const h2Get = (session: ClientHttp2Session, path: string) =>
    new Promise<{ status: number; length: number }>((resolve, reject) => {
      const stream = session.request({ ':method': 'GET', ':path': path });
      let status = 0;
      let length = 0;
      stream.on('response', (headers) => (status = Number(headers[':status'])));
      stream.on('data', (c: Buffer) => (length += c.length));
      stream.on('end', () => resolve({ status, length }));
      stream.on('error', reject);
    });
  const fillGet = async (path: string) => {
    const session = connectH2(fillStack.url);
    try {
      return await h2Get(session, path);
    } finally {
      session.close();
    }
  };

  /**
   * A client that reads the answer's head and then nothing: h2 flow control (a 64 KiB window)
   * holds the rest on the sidecar's side, as a slow reader's full receive window would.
   */
  function stalledClient(path: string) {
    const session = connectH2(fillStack.url);
    const stream = session.request({ ':method': 'GET', ':path': path });
    stream.on('error', () => {});
    const head = new Promise<void>((resolve) =>
      stream.once('response', () => {
        stream.pause();
        resolve();
      }),
    );
    return {
      head,
      leave: () => stream.close(constants.NGHTTP2_CANCEL),
      close: () => session.destroy(),
    };
  }

  it('a first requester that reads the head and stops reading does not hold up 20 callers', async () => {
    const path = `/v1.0/fill/stalled?size=${big}&delay=300`;
    const leader = stalledClient(path);
    try {
      await expect.poll(() => originSaw(path)).toBe(1);
      // Answered while the leader still holds its stream unread.
      const answers = await Promise.all(Array.from({ length: 20 }, () => fillGet(path)));
      expect(answers.every((a) => a.status === 200 && a.length === big)).toBe(true);
      expect(originSaw(path)).toBe(1);
      await leader.head;
    } finally {
      leader.close();
    }
  });

  it('a first requester that leaves before the answer (HTTP/1.1): 1 + 20 callers cost at most 2 upstream requests', async () => {
    // Held until every caller waits: a fixed delay raced the 20 callers on a loaded machine.
    const path = `/v1.0/cached/departed?size=2048&hold=departed`;
    const controller = new AbortController();
    const leader = get(path, {}, 'GET', controller.signal).catch((error: unknown) => error);
    await expect.poll(() => originSaw(path)).toBe(1);
    const answers = Promise.all(Array.from({ length: 20 }, () => get(path)));
    await expect.poll(() => cache.stats().waiting).toBe(20);
    controller.abort();
    await leader;
    release('departed');
    const all = await answers;
    expect(all.every((a) => a.status === 200 && a.body.length === 2048)).toBe(true);
    expect(originSaw(path)).toBeLessThanOrEqual(2);
  });

  it('a first requester that leaves in the middle of the body: the fill goes on, the waiters get it', async () => {
    const path = `/v1.0/fill/midway?size=${big}&hold=midway`;
    const leader = stalledClient(path);
    await expect.poll(() => originSaw(path)).toBe(1);
    const answers = Promise.all(Array.from({ length: 20 }, () => fillGet(path)));
    await expect.poll(() => fillCacheStats().waiting).toBe(20);
    release('midway');
    await leader.head;
    leader.leave();
    const all = await answers;
    leader.close();
    expect(all.every((a) => a.status === 200 && a.length === big)).toBe(true);
    expect(originSaw(path)).toBe(1);
  });
});

describe('coalescing through the proxy', () => {
  it('20 identical GETs while the upstream holds its answer cost one upstream request and get 20 identical 200s', async () => {
    const path = '/v1.0/cached/slow?hold=slow';
    const coalescedBefore = await metric('coalesced');
    const pending = Promise.all(Array.from({ length: 20 }, () => get(path)));
    await expect.poll(() => cache.stats().waiting).toBe(19);
    release('slow');
    const answers = await pending;
    expect(originSaw(path)).toBe(1);
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
    expect(new Set(answers.map((a) => a.text)).size).toBe(1);
    expect((await metric('coalesced')) - coalescedBefore).toBe(19);
  });

  it('a waiter whose client leaves is dropped; the others still get the answer', async () => {
    const path = '/v1.0/cached/slow?hold=leave&case=leave';
    let leaderDone = false;
    const leader = get(path).finally(() => (leaderDone = true));
    await expect.poll(() => originSaw(path)).toBe(1);
    const controller = new AbortController();
    const leaving = get(path, { 'x-request-id': 'leaving-waiter' }, 'GET', controller.signal);
    const staying = get(path);
    await expect.poll(() => cache.stats().waiting).toBe(2);
    controller.abort();
    await expect(leaving).rejects.toThrow();
    // Dropped at once: its request ends (499, nothing sent) while the leader is still waiting.
    await expect
      .poll(() => stack.logs.find((l) => l.requestId === 'leaving-waiter'))
      .toMatchObject({ status: 499 });
    expect(cache.stats().waiting).toBe(1);
    expect(leaderDone).toBe(false);
    release('leave');
    const [a, b] = await Promise.all([leader, staying]);
    expect(b.text).toBe(a.text);
    expect(originSaw(path)).toBe(1);
  });

  it('when the leader fails, each waiter goes upstream on its own', async () => {
    const path = '/v1.0/cached/flaky?reset=first&delay=300';
    const all = await Promise.all(Array.from({ length: 4 }, () => get(path)));
    const statuses = all.map((a) => a.status).sort();
    expect(statuses).toEqual([200, 200, 200, 502]);
    // The sidecar's own error answer under a rule carries Cache-Status too.
    expect(all.find((a) => a.status === 502)!.headers['cache-status']).toBe(
      'oauth-sidecar; fwd=uri-miss',
    );
    // The leader's failed request, then one each for the three waiters.
    expect(originSaw(path)).toBe(4);
  });

  it('counts hits, misses and bypasses', async () => {
    const path = '/v1.0/cached/metrics?case=1';
    const before = await Promise.all(['hit', 'miss', 'bypass'].map(metric));
    await get(path);
    await get(path);
    await get(path, { 'cache-control': 'no-store' });
    const after = await Promise.all(['hit', 'miss', 'bypass'].map(metric));
    expect(after.map((v, i) => v - before[i]!)).toEqual([1, 1, 1]);
  });
});

describe('response cache in a real sidecar process (main.ts wiring)', () => {
  it('CACHE_RULES turns it on: a hit, /status entries and bytes, the metrics', async () => {
    const caFile = writeTemp('ca.pem', standin.caCert);
    const sidecar = await startSidecarProcess({
      UPSTREAM_BASE_URL: standin.url,
      UPSTREAM_CA_FILE: caFile,
      CLIENT_ID: 'demo-client',
      CLIENT_SECRET: 'demo-secret',
      CACHE_RULES: '/v1.0/contracts/=60',
    });
    try {
      await waitReady(sidecar);
      const before = standin.apiRequests.length;
      const first = await request(`${sidecar.proxyUrl}/v1.0/contracts/`);
      const firstBody = await first.body.text();
      const second = await request(`${sidecar.proxyUrl}/v1.0/contracts/`);
      expect(await second.body.text()).toBe(firstBody);
      expect(second.headers['cache-status']).toBe('oauth-sidecar; hit');
      expect(standin.apiRequests.length - before).toBe(1);

      const status = (await (await request(`${sidecar.adminUrl}/status`)).body.json()) as {
        cache: { enabled: boolean; entries: number; bytes: number };
      };
      expect(status.cache).toMatchObject({ enabled: true, entries: 1 });
      expect(status.cache.bytes).toBeGreaterThan(firstBody.length);
      const metrics = await (await request(`${sidecar.adminUrl}/metrics`)).body.text();
      expect(metrics).toMatch(/^oauth_sidecar_cache_requests_total\{result="hit"\} 1$/m);
      expect(metrics).toMatch(/^oauth_sidecar_cache_requests_total\{result="miss"\} 1$/m);
      expect(metrics).toMatch(new RegExp(`^oauth_sidecar_cache_bytes ${status.cache.bytes}$`, 'm'));
    } finally {
      await sidecar.stop();
    }
  });
});

describe('response cache over h2c', () => {
  it('stores and serves through Http2ServerResponse, coalescing included', async () => {
    const h2cache = createResponseCache({
      clock: cacheClock,
      metrics: createMetrics({
        registry: createMetricsRegistry(),
        defaultMetrics: false,
      }),
      settings: {
        rules: [{ prefix: '/v1.0/', ttlSeconds: 60 }],
        maxBytes: 1 << 20,
        maxEntryBytes: 1 << 16,
        maxEntries: 10_000,
        ...NO_STALE,
      },
    });
    const h2 = await startStack(standin, { upstream: originUrl, http2: true, cache: h2cache });
    const session = connectH2(h2.url);
    const get2 = (path: string) =>
      new Promise<{ status: number; body: string; cacheStatus: string }>((resolve, reject) => {
        const stream = session.request({ ':method': 'GET', ':path': path });
        let status = 0;
        let cacheStatus = '';
        const chunks: Buffer[] = [];
        stream.on('response', (headers) => {
          status = Number(headers[':status']);
          cacheStatus = String(headers['cache-status']);
        });
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () =>
          resolve({ status, body: Buffer.concat(chunks).toString(), cacheStatus }),
        );
        stream.on('error', reject);
      });
    try {
      const path = '/v1.0/h2/slow?delay=300&size=20000';
      const first = await Promise.all([get2(path), get2(path), get2(path)]);
      expect(first.map((a) => a.body.length)).toEqual([20000, 20000, 20000]);
      expect(originSaw(path)).toBe(1);
      const hit = await get2(path);
      expect(hit).toMatchObject({ status: 200, cacheStatus: 'oauth-sidecar; hit' });
      expect(hit.body).toBe(first[0].body);
    } finally {
      session.close();
      await h2.close();
    }
  });
});
