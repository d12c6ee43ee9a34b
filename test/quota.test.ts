/**
 * The quota guard against a real upstream (the HTTPS stand-in on 127.0.0.1:0) through the real
 * proxy server (docs/quota-guard.md): cooldowns from the API's 429/503 Retry-After, and the
 * rate limit under concurrency, its order, its wait bound and clients that leave while queued.
 */
import { connect as connectH2, constants as h2 } from 'node:http2';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, startStandin, type Standin, type TestPki } from '../src/standin/index.js';
import { waitFor } from './helpers/sidecar-process.js';
import { counterValue, startStack, type Stack, type StackOptions } from './proxy-stack.js';

let pki: TestPki;
let standin: Standin;
let stack: Stack | undefined;
const client = new Agent({ connections: 128 });

beforeAll(async () => {
  pki = await createTestPki();
  standin = await startStandin({ pki });
});

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

afterAll(async () => {
  await standin.close();
  await client.close();
});

async function open(
  quota: StackOptions['quota'] = {},
  limits?: StackOptions['limits'],
): Promise<Stack> {
  stack = await startStack(standin, { quota, limits });
  return stack;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function get(path: string, signal?: AbortSignal): Promise<Answer> {
  const res = await request(`${stack!.url}${path}`, { dispatcher: client, signal });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

function code(answer: Answer): string | undefined {
  return (JSON.parse(answer.body) as { errors?: { code: string }[] }).errors?.[0]?.code;
}

/** API requests the stand-in received whose URL contains `marker`. */
function seen(marker: string) {
  return standin.apiRequests.filter((r) => r.url.includes(marker));
}

describe('cooldown from the API', () => {
  it('a 429 with Retry-After seconds reaches its client as it came; then the sidecar answers itself and forwards nothing', async () => {
    const s = await open();
    const first = await get('/v1.0/status/429?retry-after=30');
    expect(first.status).toBe(429);
    expect(first.headers['retry-after']).toBe('30');
    expect(JSON.parse(first.body)).toEqual({ status: 429 });

    const before = standin.apiRequests.length;
    for (let i = 0; i < 5; i++) {
      const refused = await get(`/v1.0/contracts/?cooldown-${i}`);
      expect(refused.status).toBe(429);
      expect(code(refused)).toBe('upstream_rate_limited');
      const seconds = Number(refused.headers['retry-after']);
      expect(seconds).toBeGreaterThanOrEqual(29);
      expect(seconds).toBeLessThanOrEqual(30);
    }
    expect(standin.apiRequests.length).toBe(before);
    expect(
      await counterValue(s.metrics, 'oauth_sidecar_proxy_rejected_total', {
        code: 'upstream_rate_limited',
      }),
    ).toBe(5);
    const gauge = await s.metrics.registry
      .getSingleMetric('oauth_sidecar_upstream_cooldown_seconds')!
      .get();
    expect(gauge.values[0]!.value).toBeGreaterThan(28);
    expect(s.quota.status().cooldown).toMatchObject({ status: 429 });
  });

  it('a 429 with Retry-After as an HTTP date', async () => {
    await open();
    const at = new Date(Date.now() + 20_000).toUTCString();
    const first = await get(`/v1.0/status/429?retry-after=${encodeURIComponent(at)}`);
    expect(first.status).toBe(429);
    const refused = await get('/v1.0/contracts/');
    expect(code(refused)).toBe('upstream_rate_limited');
    const seconds = Number(refused.headers['retry-after']);
    // Whole seconds on both dates (Retry-After and the answer's Date): 20 give or take one.
    expect(seconds).toBeGreaterThanOrEqual(19);
    expect(seconds).toBeLessThanOrEqual(21);
  });

  it('is capped at maxCooldownSeconds, and requests go upstream again once it is over', async () => {
    const s = await open({ maxCooldownSeconds: 1 });
    await get('/v1.0/status/429?retry-after=3600');
    const refused = await get('/v1.0/contracts/');
    expect(code(refused)).toBe('upstream_rate_limited');
    expect(refused.headers['retry-after']).toBe('1');
    await waitFor(() => s.quota.cooldownSecondsLeft() === 0, 3_000, 'the capped cooldown to end');
    const again = await get('/v1.0/contracts/?after-cap');
    expect(again.status).toBe(200);
    expect(seen('after-cap')).toHaveLength(1);
  });

  it('a 503 with Retry-After starts a 503 cooldown: upstream_unavailable', async () => {
    await open();
    const first = await get('/v1.0/status/503?retry-after=12');
    expect(first.status).toBe(503);
    const before = standin.apiRequests.length;
    const refused = await get('/v1.0/contracts/');
    expect(refused.status).toBe(503);
    expect(code(refused)).toBe('upstream_unavailable');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(11);
    expect(standin.apiRequests.length).toBe(before);
  });

  it('a 429 or 503 without Retry-After starts none', async () => {
    await open();
    expect((await get('/v1.0/status/429')).status).toBe(429);
    expect((await get('/v1.0/status/503')).status).toBe(503);
    const next = await get('/v1.0/contracts/?no-cooldown');
    expect(next.status).toBe(200);
    expect(seen('no-cooldown')).toHaveLength(1);
  });
});

describe('rate limit', () => {
  it('60 simultaneous requests: the upstream never sees more than the bucket allows, no wait passes queueMs', async () => {
    // queueMs 900: the histogram's 1 s bucket then holds every wait even when a timer fires late
    // on a loaded machine.
    const s = await open({ rateLimit: { count: 10, periodMs: 1_000 }, queueMs: 900 });
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => get(`/v1.0/contracts/?burst=${i}`)),
    );
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    expect(ok.length + refused.length).toBe(60);
    for (const a of refused) {
      expect(code(a)).toBe('rate_limited');
      expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    const arrivals = seen('burst=')
      .map((r) => r.at)
      .sort((a, b) => a - b);
    expect(arrivals.length).toBe(ok.length);
    // A full bucket of 10, then one slot every 100 ms for at least queueMs (more when the 60
    // arrivals spread out: each may wait queueMs from its own arrival).
    expect(ok.length).toBeGreaterThanOrEqual(18);
    // The k-th request reached the upstream no earlier than its slot: (k - 9) * 100 ms.
    arrivals.forEach((at, k) => {
      expect(at - started).toBeGreaterThanOrEqual((k - 9) * 100 - 2);
    });
    // Every admitted request was observed once, none waited past queueMs.
    const wait = await s.metrics.registry
      .getSingleMetric('oauth_sidecar_rate_limit_wait_seconds')!
      .get();
    const count = wait.values.find((v) =>
      (v as { metricName?: string }).metricName?.endsWith('_count'),
    )!.value;
    const withinQueueMs = wait.values.find((v) => v.labels.le === 1)!.value;
    expect(count).toBe(ok.length);
    expect(withinQueueMs).toBe(count);
    expect(
      await counterValue(s.metrics, 'oauth_sidecar_proxy_rejected_total', { code: 'rate_limited' }),
    ).toBe(refused.length);
  });

  it('waiting requests go upstream in arrival order', async () => {
    const s = await open({ rateLimit: { count: 1, periodMs: 100 }, queueMs: 5_000 });
    const pending: Promise<Answer>[] = [get('/v1.0/contracts/?order=0')];
    await waitFor(() => seen('order=0').length === 1, 5_000, 'the first request');
    for (let i = 1; i <= 10; i++) {
      pending.push(get(`/v1.0/contracts/?order=${i}`));
      // Arrival order is the order the sidecar queued them in.
      await waitFor(
        () => (s.quota.status().rateLimit?.queued ?? 0) + seen('order=').length === i + 1,
        5_000,
        `request ${i} queued or sent`,
      );
    }
    const answers = await Promise.all(pending);
    expect(answers.map((a) => a.status)).toEqual(Array(11).fill(200));
    expect(seen('order=').map((r) => r.url)).toEqual(
      Array.from({ length: 11 }, (_, i) => `/v1.0/contracts/?order=${i}`),
    );
  });

  it('waiting requests count against proxy.maxInFlight', async () => {
    const s = await open(
      { rateLimit: { count: 1, periodMs: 1_000 }, queueMs: 10_000 },
      { maxInFlight: 3 },
    );
    expect((await get('/v1.0/contracts/?inflight=a')).status).toBe(200);
    const waiting = [get('/v1.0/contracts/?inflight=b'), get('/v1.0/contracts/?inflight=c')];
    await waitFor(() => s.quota.status().rateLimit?.queued === 2, 5_000, 'two queued');
    waiting.push(get('/v1.0/contracts/?inflight=d'));
    await waitFor(() => s.quota.status().rateLimit?.queued === 3, 5_000, 'three queued');
    const over = await get('/v1.0/contracts/?inflight=e');
    expect(over.status).toBe(503);
    expect(code(over)).toBe('overloaded');
    expect((await Promise.all(waiting)).map((a) => a.status)).toEqual([200, 200, 200]);
    expect(seen('inflight=e')).toHaveLength(0);
  });

  it('an HTTP/2 stream reset while queued frees its place at once and is never sent', async () => {
    stack = await startStack(standin, {
      http2: true,
      quota: { rateLimit: { count: 1, periodMs: 1_000 }, queueMs: 2_000 },
    });
    const s = stack;
    const session = connectH2(s.url);
    try {
      const send = (path: string) => {
        const stream = session.request({ ':path': path });
        const status = new Promise<number>((resolve, reject) => {
          stream.once('response', (headers) => resolve(Number(headers[':status'])));
          stream.once('error', reject);
        });
        stream.resume();
        return { stream, status };
      };
      expect(await send('/v1.0/contracts/?h2gone=a').status).toBe(200);
      const b = send('/v1.0/contracts/?h2gone=b');
      b.status.catch(() => undefined);
      await waitFor(() => s.quota.status().rateLimit?.queued === 1, 5_000, 'b queued');
      b.stream.close(h2.NGHTTP2_CANCEL);
      await waitFor(() => s.quota.status().rateLimit?.queued === 0, 5_000, 'b gone');
      // b's place went to c: c gets the next slot, b was never sent.
      expect(await send('/v1.0/contracts/?h2gone=c').status).toBe(200);
      expect(seen('h2gone=').map((r) => r.url.split('=')[1])).toEqual(['a', 'c']);
    } finally {
      session.close();
    }
  });

  it('a client that leaves while queued frees its place at once and is never sent', async () => {
    const s = await open({ rateLimit: { count: 1, periodMs: 1_000 }, queueMs: 2_000 });
    expect((await get('/v1.0/contracts/?leave=a')).status).toBe(200);
    const leaving = new AbortController();
    const b = get('/v1.0/contracts/?leave=b', leaving.signal).catch((err: unknown) => err);
    await waitFor(() => s.quota.status().rateLimit?.queued === 1, 5_000, 'b queued');
    const c = get('/v1.0/contracts/?leave=c');
    await waitFor(() => s.quota.status().rateLimit?.queued === 2, 5_000, 'c queued');
    // The queue holds queueMs worth of slots: a fourth request is refused at once.
    const d = await get('/v1.0/contracts/?leave=d');
    expect(d.status).toBe(429);
    expect(code(d)).toBe('rate_limited');

    leaving.abort();
    await b;
    await waitFor(() => s.quota.status().rateLimit?.queued === 1, 5_000, 'b gone from the queue');
    const e = get('/v1.0/contracts/?leave=e');
    expect((await c).status).toBe(200);
    expect((await e).status).toBe(200);
    expect(seen('leave=').map((r) => r.url.split('=')[1])).toEqual(['a', 'c', 'e']);
  });
});
