/**
 * Tracing with OpenTelemetry (docs/reference.md "Traces"): a real sidecar process (the bundle, so
 * the lazily loaded SDK chunk is what runs), the HTTPS stand-in as the API and an OTLP/HTTP
 * receiver started by the test, for protobuf and JSON. The caller's trace goes through the
 * sidecar: server span, the waits that happened, one client span per upstream attempt whose id
 * is the parent id the API received; token grants have spans; no secret in any attribute. The
 * tests run side by side, each with a receiver of its own; the one that revokes the API's tokens
 * has a stand-in of its own.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import {
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from './helpers/otlp-receiver.js';
import { waitFor, type SidecarProcess } from './helpers/sidecar-process.js';
import { useStandinFleet, type OwnTest, type Sidecars } from './helpers/standin-fleet.js';
import { realClock } from './helpers/wait.js';

/** The sidecar process's rate limit refills on its own clock. */
const rateLimit = realClock('the sidecar process’s rate limit (1/s) refills on its own clock');

const fixture = useStandinFleet();

const CLIENT_ID = 'demo-client';
const CLIENT_SECRET = 'demo-secret';
const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 };

/** A sidecar that exports every 50 ms, stopped when `test` finishes. */
function start(
  test: OwnTest,
  env: Record<string, string>,
  api?: Sidecars,
): Promise<SidecarProcess> {
  const traced = { OTEL_BSP_SCHEDULE_DELAY: '50', ...env };
  return api === undefined ? fixture.start(traced, test) : api.start(traced);
}

/**
 * A receiver of `test`'s own, closed when it finishes: registered before its sidecars, so they
 * stop (and flush their spans) while it still answers (finish hooks run in reverse).
 */
async function receiverFor(
  test: OwnTest,
  options?: Parameters<typeof startOtlpReceiver>[0],
): Promise<OtlpReceiver> {
  const receiver = await startOtlpReceiver(options);
  test.onTestFinished(() => receiver.close());
  return receiver;
}

function traceparent(traceId: string, spanId: string): string {
  return `00-${traceId}-${spanId}-01`;
}

function randomHex(bytes: number): string {
  return Buffer.from(Array.from({ length: bytes }, () => Math.floor(Math.random() * 256))).toString(
    'hex',
  );
}

async function get(s: SidecarProcess, path: string, headers: Record<string, string> = {}) {
  const res = await request(`${s.proxyUrl}${path}`, { headers });
  await res.body.dump();
  return res.statusCode;
}

/** `oauth_sidecar_tracing_spans_dropped_total{reason}` as the admin listener shows it. */
async function droppedSpans(s: SidecarProcess, reason: string): Promise<number> {
  const metrics = await (await request(`${s.adminUrl}/metrics`)).body.text();
  const line = new RegExp(
    `oauth_sidecar_tracing_spans_dropped_total\\{reason="${reason}"\\} (\\d+)`,
  );
  return Number(line.exec(metrics)?.[1] ?? 0);
}

function spansOf(receiver: OtlpReceiver, traceId: string): ReceivedSpan[] {
  return receiver.spans.filter((s) => s.traceId === traceId);
}

/** Everything `receiver` got holds no token, no secret and no client id. */
function expectNoSecrets(receiver: OtlpReceiver, standin = fixture.standin): void {
  const secrets = [CLIENT_SECRET, CLIENT_ID, ...standin.issuedTokens()].filter((x) => x.length > 0);
  for (const body of receiver.raw) for (const secret of secrets) expect(body).not.toContain(secret);
  for (const span of receiver.spans) {
    for (const value of Object.values({ ...span.attributes, ...span.resource })) {
      for (const secret of secrets) expect(String(value)).not.toContain(secret);
    }
  }
}

describe.concurrent.each([
  ['http/protobuf', 'application/x-protobuf'],
  ['http/json', 'application/json'],
])('tracing over OTLP %s', (protocol, contentType) => {
  it("continues the caller's trace: server span, client span as the API's parent, a grant span; nothing secret", async (test) => {
    const receiver = await receiverFor(test);
    const s = await start(test, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      OTEL_SERVICE_NAME: 'sidecar-under-test',
    });
    const traceId = randomHex(16);
    const callerSpan = randomHex(8);
    const marker = `trace-${protocol.replace('/', '-')}`;
    expect(
      await get(s, `/v1.0/contracts/?${marker}`, {
        traceparent: traceparent(traceId, callerSpan),
        tracestate: 'vendor=opaque',
      }),
    ).toBe(200);
    await waitFor(() => spansOf(receiver, traceId).length >= 2, 10_000, 'the request spans');
    await waitFor(
      () => receiver.spans.some((x) => x.name === 'oauth.token'),
      10_000,
      'a grant span',
    );
    expect(receiver.contentTypes[0]).toContain(contentType);

    const server = spansOf(receiver, traceId).find((x) => x.kind === SPAN_KIND.SERVER)!;
    expect(server.parentSpanId).toBe(callerSpan);
    expect(server.name).toBe('GET /v1.0/');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': '/v1.0/',
      'url.path': '/v1.0/contracts/',
      'http.response.status_code': 200,
    });
    // The query string only when tracing is told to.
    expect(JSON.stringify(server.attributes)).not.toContain(marker);
    expect(server.resource['service.name']).toBe('sidecar-under-test');

    const client = spansOf(receiver, traceId).find((x) => x.kind === SPAN_KIND.CLIENT)!;
    expect(client.parentSpanId).toBe(server.spanId);
    expect(client.attributes['http.response.status_code']).toBe(200);
    const sent = fixture.standin.apiRequests.find((r) => r.url.includes(marker))!;
    expect(sent.headers.traceparent).toBe(traceparent(traceId, client.spanId));
    expect(sent.headers.tracestate).toBe('vendor=opaque');

    // Prometheus asking for OpenMetrics reads the trace id on the duration histogram.
    const scrape = await request(`${s.adminUrl}/metrics`, {
      headers: { accept: 'application/openmetrics-text; version=1.0.0,text/plain;q=0.5' },
    });
    expect(scrape.headers['content-type']).toContain('application/openmetrics-text');
    const open = await scrape.body.text();
    expect(open).toMatch(
      new RegExp(
        `oauth_sidecar_upstream_request_duration_seconds_bucket\\{[^}]*\\} \\d+ # \\{trace_id="${traceId}"\\}`,
      ),
    );
    expect(open.endsWith('# EOF\n')).toBe(true);

    const grant = receiver.spans.find((x) => x.name === 'oauth.token')!;
    expect(grant.attributes).toMatchObject({
      'oauth.grant_type': 'client_credentials',
      'oauth.outcome': 'success',
    });
    expectNoSecrets(receiver);
  }, 60_000);
});

describe.concurrent('tracing: waits, replays, failures', { timeout: 60_000 }, () => {
  it('a quota wait shows as a child span; a replay after a 401 is a second client span, with the token wait', async (test) => {
    const receiver = await receiverFor(test);
    // Its own stand-in: the tokens it revokes are no other test's.
    const api = await fixture.own(test);
    const s = await start(
      test,
      { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, UPSTREAM_RATE_LIMIT: '1/s' },
      api,
    );
    // The bucket's one slot goes to the first; the second waits for the next.
    const traces = [randomHex(16), randomHex(16)];
    const statuses = await Promise.all(
      traces.map((t) =>
        get(s, '/v1.0/contracts/?quota-wait', { traceparent: traceparent(t, randomHex(8)) }),
      ),
    );
    expect(statuses).toEqual([200, 200]);
    // The wait ends before its request: the two may arrive in different batches.
    const ownerOf = (wait: ReceivedSpan) =>
      spansOf(receiver, wait.traceId).find((x) => x.kind === SPAN_KIND.SERVER);
    await waitFor(
      () => receiver.spans.some((x) => x.name === 'quota.wait' && ownerOf(x) !== undefined),
      10_000,
      'a quota.wait span and its request',
    );
    const wait = receiver.spans.find((x) => x.name === 'quota.wait')!;
    const owner = ownerOf(wait)!;
    expect(wait.parentSpanId).toBe(owner.spanId);

    // A 401 on the current token: the keeper renews and the request is sent once more.
    api.standin.revokeAccessTokens();
    const replayTrace = randomHex(16);
    await rateLimit.sleep(1_100); // the next rate-limit slot
    expect(
      await get(s, '/v1.0/contracts/?replayed', {
        traceparent: traceparent(replayTrace, randomHex(8)),
      }),
    ).toBe(200);
    await waitFor(
      () => spansOf(receiver, replayTrace).filter((x) => x.kind === SPAN_KIND.CLIENT).length === 2,
      10_000,
      'two client spans',
    );
    const attempts = spansOf(receiver, replayTrace).filter((x) => x.kind === SPAN_KIND.CLIENT);
    expect(attempts.map((a) => a.attributes['http.response.status_code']).sort()).toEqual([
      200, 401,
    ]);
    expect(
      attempts.find((a) => a.attributes['http.response.status_code'] === 200)!.attributes[
        'http.request.resend_count'
      ],
    ).toBe(1);
    expect(spansOf(receiver, replayTrace).some((x) => x.name === 'token.wait')).toBe(true);
    expectNoSecrets(receiver, api.standin);
  });

  it('a malformed traceparent from a client starts a new trace; the API gets a valid one', async (test) => {
    const receiver = await receiverFor(test);
    const s = await start(test, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
    const bad = [
      'garbage',
      `00-${'0'.repeat(32)}-${randomHex(8)}-01`,
      `ff-${randomHex(16)}-${randomHex(8)}-01`,
    ];
    for (const [i, value] of bad.entries()) {
      expect(await get(s, `/v1.0/contracts/?malformed-${i}`, { traceparent: value })).toBe(200);
      const sent = fixture.standin.apiRequests.find((r) => r.url.includes(`malformed-${i}`))!;
      expect(sent.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(sent.headers.traceparent).not.toBe(value);
    }
  });

  it('with the cache on, each lookup is a span: a miss, then a hit that goes nowhere', async (test) => {
    const receiver = await receiverFor(test);
    const s = await start(test, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      CACHE_RULES: '/v1.0/contracts/=60',
    });
    const [first, second] = [randomHex(16), randomHex(16)];
    for (const t of [first, second]) {
      expect(
        await get(s, '/v1.0/contracts/?cached', { traceparent: traceparent(t, randomHex(8)) }),
      ).toBe(200);
    }
    await waitFor(
      () => spansOf(receiver, first).length >= 3 && spansOf(receiver, second).length >= 2,
      10_000,
      'the lookups',
    );
    const lookup = (t: string) => spansOf(receiver, t).find((x) => x.name === 'cache.lookup')!;
    expect(lookup(first).attributes['oauth_sidecar.cache.result']).toBe('miss');
    expect(lookup(second).attributes['oauth_sidecar.cache.result']).toBe('hit');
    expect(spansOf(receiver, second).some((x) => x.kind === SPAN_KIND.CLIENT)).toBe(false);
  });

  it('a dead receiver fails no request, and the failure is logged without the headers', async (test) => {
    const receiver = await startOtlpReceiver();
    const dead = receiver.url;
    await receiver.close();
    const s = await start(test, {
      OTEL_EXPORTER_OTLP_ENDPOINT: dead,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=collector-key-123',
      OTEL_BSP_EXPORT_TIMEOUT: '2000',
    });
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => get(s, `/v1.0/contracts/?dead-${i}`)),
    );
    expect(statuses).toEqual(Array(20).fill(200));
    await waitFor(
      () => s.stdout.some((l) => l.includes('span export failed')),
      15_000,
      'the export failure in the log',
    );
    expect(s.stdout.filter((l) => l.includes('span export failed'))).toHaveLength(1);
    expect(s.stdout.join('\n')).not.toContain('collector-key-123');
    // Killed, not stopped: a SIGTERM would try the dead receiver once more for up to the export
    // timeout; the shutdown flush is not what this test checks.
    await s.stop('SIGKILL');
  });

  it('a collector that refuses a batch once (503, Retry-After) gets the same batch again', async (test) => {
    const receiver = await receiverFor(test, { refuse: 1, retryAfter: 1 });
    const s = await start(test, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
    const traceId = randomHex(16);
    expect(
      await get(s, '/v1.0/contracts/?retried', {
        traceparent: traceparent(traceId, randomHex(8)),
      }),
    ).toBe(200);
    await waitFor(
      () => spansOf(receiver, traceId).length === 2,
      15_000,
      'both spans of the request',
    );
    expect(receiver.raw[1]).toBe(receiver.raw[0]);
    const metrics = await (await request(`${s.adminUrl}/metrics`)).body.text();
    expect(metrics).not.toMatch(/oauth_sidecar_tracing_spans_dropped_total\{/);
  });

  it.for([400, 413, 500])(
    'spans a collector refuses with %i are counted as dropped (reason refused)',
    async (status, test) => {
      const receiver = await receiverFor(test, { refuse: 1_000, status });
      const s = await start(test, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
      for (let i = 0; i < 3; i++) expect(await get(s, `/v1.0/contracts/?refused-${i}`)).toBe(200);
      // 7 spans: a grant, then a server and a client span per request.
      await waitFor(
        async () => (await droppedSpans(s, 'refused')) === 7,
        10_000,
        'seven refused spans counted',
      );
      expect(receiver.spans).toHaveLength(0);
    },
  );

  it('SIGTERM exports what is queued before the process exits', async (test) => {
    const receiver = await receiverFor(test);
    // No scheduled export in the test's time: only the shutdown sends the spans.
    const s = await start(test, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '600000',
    });
    const traceId = randomHex(16);
    expect(
      await get(s, '/v1.0/contracts/?flushed', { traceparent: traceparent(traceId, randomHex(8)) }),
    ).toBe(200);
    expect(spansOf(receiver, traceId)).toHaveLength(0);
    expect(await s.stop()).toBe(0);
    expect(spansOf(receiver, traceId).length).toBeGreaterThanOrEqual(2);
  });

  it('a full export queue drops spans, counted; requests are not slowed by a collector that never answers', async (test) => {
    const hung = createServer(() => undefined);
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    try {
      const s = await start(test, {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(hung.address() as AddressInfo).port}`,
        OTEL_BSP_MAX_QUEUE_SIZE: '4',
      });
      // Each answered while the collector holds every export call unanswered.
      for (let i = 0; i < 20; i++) expect(await get(s, `/v1.0/contracts/?dropped-${i}`)).toBe(200);
      // 41 spans (a grant, then a server and a client span per request), 4 exporting, 4 queued.
      expect(await droppedSpans(s, 'queue_full')).toBeGreaterThanOrEqual(30);
      // Killed, not stopped: a SIGTERM would wait the shutdown flush out against a collector that
      // never answers, and the flush on SIGTERM is the test above's, not this one's.
      await s.stop('SIGKILL');
    } finally {
      hung.closeAllConnections();
      hung.close();
    }
  });

  it('off: traceparent passes through unchanged and no span is made', async (test) => {
    const s = await start(test, {});
    const parent = traceparent(randomHex(16), randomHex(8));
    expect(await get(s, '/v1.0/contracts/?untraced', { traceparent: parent })).toBe(200);
    const sent = fixture.standin.apiRequests.find((r) => r.url.includes('untraced'))!;
    expect(sent.headers.traceparent).toBe(parent);
    const metrics = await (await request(`${s.adminUrl}/metrics`)).body.text();
    expect(metrics).not.toContain('tracing_spans_dropped_total');
  });
});
