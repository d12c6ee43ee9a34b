import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPExporterError } from '@opentelemetry/otlp-exporter-base';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import type { TracingConfig } from '../config/types.js';
import { EXPORT_FAILURE_LOG_MS, LoggedExporter, dropReason } from './otel-export.js';
import { createTracing } from './otel.js';
import type { DropReason } from './tracing.js';

const config = (overrides: Partial<TracingConfig> = {}): TracingConfig => ({
  url: 'http://127.0.0.1:9/v1/traces',
  protocol: 'http/protobuf',
  headers: {},
  serviceName: 'oauth-sidecar',
  resourceAttributes: { 'deployment.environment': 'test' },
  sampler: 'parentbased_always_on',
  samplerArg: 1,
  maxQueueSize: 2048,
  maxExportBatchSize: 512,
  scheduleDelayMs: 60_000,
  exportTimeoutMs: 1_000,
  recordQuery: false,
  ...overrides,
});

function counter() {
  const counts: Partial<Record<DropReason, number>> = {};
  return {
    counts,
    inc({ reason }: { reason: DropReason }, count: number) {
      counts[reason] = (counts[reason] ?? 0) + count;
    },
  };
}

function deps(dropped = counter(), warnings: unknown[] = []) {
  return {
    logger: { warn: (fields: unknown) => warnings.push(fields) } as never,
    dropped,
    pathPrefixes: ['/v1.0/'],
    upstream: 'https://api.example:8443',
    tokenUrl: 'https://auth.example/oauth/token',
    version: '0.0.0-test',
  };
}

/** An exporter that keeps what it is given (after the processor's shutdown too). */
function collecting(): SpanExporter & { spans: ReadableSpan[] } {
  const spans: ReadableSpan[] = [];
  return {
    spans,
    export(batch, done) {
      spans.push(...batch);
      done({ code: ExportResultCode.SUCCESS });
    },
    shutdown: () => Promise.resolve(),
  };
}

const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('spans on the SDK', () => {
  it('a request\'s server span, its wait and its attempt, as docs/reference.md "Traces" lists them', async () => {
    const memory = collecting();
    const tracing = createTracing(config(), deps(), memory);
    const request = tracing.request(
      { traceparent: PARENT, 'x-request-id': 'req-1' },
      'GET',
      '/v1.0/contracts/?secret=1',
    );
    // Wall-clock milliseconds, as the sidecar's clock gives them. (Small numbers such as 1000 would
    // be read by the SDK as performance.now() offsets once the process is older than they are.)
    const waitEnd = Date.now();
    request.wait('token.wait', waitEnd - 250, waitEnd);
    const attempt = request.attempt('GET', true);
    expect(attempt.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
    attempt.end(503);
    attempt.end(200); // once
    request.end(502, 'upstream_failed');
    expect(request.sampledTraceId).toBe('0af7651916cd43dd8448eb211c80319c');
    await tracing.shutdown(1_000);

    const spans = memory.spans;
    const byName = (name: string): ReadableSpan => spans.find((s) => s.name === name)!;
    const server = byName('GET /v1.0/');
    expect(server.kind).toBe(SpanKind.SERVER);
    expect(server.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(server.attributes).toEqual({
      'http.request.method': 'GET',
      'url.path': '/v1.0/contracts/',
      'http.route': '/v1.0/',
      'http.request.header.x-request-id': ['req-1'],
      'http.response.status_code': 502,
      'oauth_sidecar.error_code': 'upstream_failed',
      'error.type': 'upstream_failed',
    });
    expect(server.status.code).toBe(SpanStatusCode.ERROR);
    expect(server.resource.attributes).toMatchObject({
      'service.name': 'oauth-sidecar',
      'service.version': '0.0.0-test',
      'deployment.environment': 'test',
    });
    const wait = byName('token.wait');
    expect(wait.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
    expect(wait.duration).toEqual([0, 250_000_000]);
    const client = byName('GET');
    expect(client.kind).toBe(SpanKind.CLIENT);
    expect(attempt.traceparent).toContain(client.spanContext().spanId);
    expect(client.attributes).toEqual({
      'server.address': 'api.example',
      'server.port': 8443,
      'http.request.method': 'GET',
      'http.request.resend_count': 1,
      'http.response.status_code': 503,
      'error.type': '503',
    });
    expect(spans).toHaveLength(3);
  });

  it('an unsampled request records nothing and sends an unsampled traceparent upstream', async () => {
    const memory = collecting();
    const tracing = createTracing(config({ sampler: 'parentbased_always_off' }), deps(), memory);
    const request = tracing.request({}, 'GET', '/v1.0/x');
    request.wait('quota.wait', 1, 2);
    const attempt = request.attempt('GET', false);
    expect(attempt.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    attempt.end(200);
    // No span is started per attempt: every attempt carries the request's own context.
    expect(request.attempt('GET', true).traceparent).toBe(attempt.traceparent);
    request.end(200);
    tracing.grant('client_credentials').end('success');
    expect(request.sampledTraceId).toBeUndefined();
    await tracing.shutdown(1_000);
    expect(memory.spans).toHaveLength(0);
  });

  it('a grant is a trace of its own, ERROR unless it succeeded', async () => {
    const memory = collecting();
    const tracing = createTracing(config(), deps(), memory);
    tracing.grant('refresh_token').end('rejected');
    await tracing.shutdown(1_000);
    const [grant] = memory.spans;
    expect(grant!.parentSpanContext).toBeUndefined();
    expect(grant!.attributes).toEqual({
      'oauth.grant_type': 'refresh_token',
      'server.address': 'auth.example',
      'http.request.method': 'POST',
      'oauth.outcome': 'rejected',
    });
    expect(grant!.status.code).toBe(SpanStatusCode.ERROR);
  });
});

/** An exporter that never answers: the batch processor's queue fills. */
const hung: SpanExporter = { export: () => undefined, shutdown: () => Promise.resolve() };

describe('dropped spans, by reason', () => {
  it('a full queue drops what exceeds OTEL_BSP_MAX_QUEUE_SIZE (queue_full)', async () => {
    const dropped = counter();
    const tracing = createTracing(
      config({ maxQueueSize: 4, maxExportBatchSize: 4 }),
      deps(dropped),
      hung,
    );
    for (let i = 0; i < 20; i++) tracing.grant('client_credentials').end('success');
    // 4 handed to the exporter that never answers, 4 queued, 12 dropped.
    expect(dropped.counts).toEqual({ queue_full: 12 });
    await tracing.shutdown(10);
  });

  it.each([
    [new OTLPExporterError('Bad Request', 400), 'refused'],
    [new OTLPExporterError('Payload Too Large', 413), 'refused'],
    [new OTLPExporterError('Internal Server Error', 500), 'refused'],
    [new OTLPExporterError('Export failed with retryable status'), 'refused'],
    [Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'export_failed'],
    [new Error('Request timed out'), 'export_failed'],
  ])('%s → %s', (error, reason) => {
    expect(dropReason(error)).toBe(reason);
  });

  it("a failed export's spans are counted; the failure is logged once a minute, with the count", () => {
    const dropped = counter();
    const warnings: unknown[] = [];
    let now = 0;
    const failing: SpanExporter = {
      export: (_spans, done: (result: ExportResult) => void) =>
        done({ code: ExportResultCode.FAILED, error: new OTLPExporterError('Bad Request', 400) }),
      shutdown: () => Promise.resolve(),
    };
    const logger = { warn: (fields: unknown) => warnings.push(fields) } as never;
    const exporter = new LoggedExporter(failing, logger, dropped, () => now);
    const spans = [{}, {}, {}] as ReadableSpan[];
    const results: ExportResult[] = [];
    for (let i = 0; i < 3; i++) exporter.export(spans, (r) => results.push(r));
    now = EXPORT_FAILURE_LOG_MS;
    exporter.export(spans, (r) => results.push(r));
    expect(results.every((r) => r.code === ExportResultCode.FAILED)).toBe(true);
    expect(dropped.counts).toEqual({ refused: 12 });
    expect(warnings).toEqual([
      { failures: 1, reason: 'Bad Request' },
      { failures: 3, reason: 'Bad Request' },
    ]);
  });
});
