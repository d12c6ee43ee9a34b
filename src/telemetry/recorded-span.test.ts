import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type SpanContext,
} from '@opentelemetry/api';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace';
import { describe, expect, it, vi } from 'vitest';
import { SpanBatch } from './otlp-protobuf.js';
import { ERROR, RecordedSpan, type SpanSink } from './recorded-span.js';

const resource = resourceFromAttributes({ 'service.name': 'oauth-sidecar', 'k8s.pod.name': 'p-1' });
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const CALLER = '00f067aa0ba902b7';
const [SERVER, WAIT, CLIENT] = ['b7ad6b7169203331', '1111111111111111', '53995c3f42cd8ad8'];
const remote: SpanContext = {
  traceId: TRACE,
  spanId: CALLER,
  traceFlags: TraceFlags.SAMPLED,
  isRemote: true,
};
const context = (spanId: string): SpanContext => ({
  traceId: TRACE,
  spanId,
  traceFlags: TraceFlags.SAMPLED,
});
const WAIT_START = 1_700_000_000_123;
const WAIT_END = 1_700_000_000_456.5;

function sink(ended: ReadableSpan[]): SpanSink {
  return {
    resource,
    instrumentationScope: { name: 'oauth-sidecar', version: '1.2.3' },
    onEnd: (span) => ended.push(span),
  };
}

/** A wait span starting at `startMs`, ended into `ended`. */
function waitSpan(ended: ReadableSpan[], startMs: number): RecordedSpan {
  return new RecordedSpan(
    sink(ended),
    'token.wait',
    SpanKind.INTERNAL,
    context(WAIT),
    context(SERVER),
    {},
    startMs,
  );
}

/** A request's spans as otel.ts records them: a wait, a failed attempt, the server span. */
function recorded(): ReadableSpan[] {
  const ended: ReadableSpan[] = [];
  const to = sink(ended);
  const server = new RecordedSpan(to, 'GET /v1.0/', SpanKind.SERVER, context(SERVER), remote, {
    'http.request.method': 'GET',
    'url.path': '/v1.0/contracts/',
  });
  const wait = context(WAIT);
  new RecordedSpan(to, 'quota.wait', SpanKind.INTERNAL, wait, context(SERVER), {}, WAIT_START).end(
    WAIT_END,
  );
  const attempt = new RecordedSpan(to, 'GET', SpanKind.CLIENT, context(CLIENT), context(SERVER), {
    'server.address': 'api.example',
    'server.port': 443,
  });
  attempt.attributes['http.response.status_code'] = 502;
  attempt.attributes['error.type'] = '502';
  attempt.status = ERROR;
  attempt.end();
  server.attributes['http.response.status_code'] = 200;
  server.end();
  server.end();
  return ended;
}

/** The same spans made through the SDK's Tracer, with the same ids. */
function throughTheSdk(): ReadableSpan[] {
  const ids = [SERVER, WAIT, CLIENT];
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({
    resource,
    idGenerator: { generateTraceId: () => TRACE, generateSpanId: () => ids.shift()! },
    spanProcessors: [new SimpleSpanProcessor({ exporter })],
  });
  const tracer = provider.getTracer('oauth-sidecar', '1.2.3');
  const parent = trace.setSpanContext(ROOT_CONTEXT, remote);
  const server = tracer.startSpan('GET /v1.0/', { kind: SpanKind.SERVER }, parent);
  server.setAttributes({ 'http.request.method': 'GET', 'url.path': '/v1.0/contracts/' });
  const under = trace.setSpan(ROOT_CONTEXT, server);
  tracer
    .startSpan('quota.wait', { kind: SpanKind.INTERNAL, startTime: WAIT_START }, under)
    .end(WAIT_END);
  const attempt = tracer.startSpan('GET', { kind: SpanKind.CLIENT }, under);
  attempt.setAttributes({ 'server.address': 'api.example', 'server.port': 443 });
  attempt.setAttribute('http.response.status_code', 502);
  attempt.setAttribute('error.type', '502');
  attempt.setStatus({ code: SpanStatusCode.ERROR });
  attempt.end();
  server.setAttribute('http.response.status_code', 200);
  server.end();
  return exporter.getFinishedSpans();
}

/** The OTLP/JSON request of `spans`, without the times the clock chose (the wait's are given). */
interface JsonSpan {
  name: string;
  startTimeUnixNano?: string;
  endTimeUnixNano?: string;
}
interface JsonRequest {
  resourceSpans: { scopeSpans: { spans: JsonSpan[] }[] }[];
}

function json(spans: ReadableSpan[]): JsonRequest {
  const text = Buffer.from(JsonTraceSerializer.serializeRequest(spans)!).toString();
  const request = JSON.parse(text) as JsonRequest;
  for (const span of request.resourceSpans[0]!.scopeSpans[0]!.spans) {
    if (span.name === 'quota.wait') continue;
    expect(BigInt(span.endTimeUnixNano!) >= BigInt(span.startTimeUnixNano!)).toBe(true);
    delete span.startTimeUnixNano;
    delete span.endTimeUnixNano;
  }
  return request;
}

describe('spans recorded by the sidecar', () => {
  it("export exactly as the SDK's spans of the same request (JSON), but for the clock's times", () => {
    const ours = json(recorded());
    expect(ours).toEqual(json(throughTheSdk()));
    expect(ours.resourceSpans[0]!.scopeSpans[0]!.spans[0]).toMatchObject({
      name: 'quota.wait',
      startTimeUnixNano: '1700000000123000000',
      endTimeUnixNano: '1700000000456500000',
    });
  });

  it('encode byte for byte as OpenTelemetry’s protobuf serializer does', () => {
    const spans = recorded();
    const batch = new SpanBatch();
    for (const span of spans) batch.add(span);
    const ours = Buffer.from(batch.request());
    expect(ours.equals(Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!))).toBe(true);
  });

  it('an end before the start (the wall clock stepped back) is the start, as in the SDK', () => {
    const ended: ReadableSpan[] = [];
    const span = waitSpan(ended, WAIT_START);
    span.end(WAIT_START - 5_000);
    expect(ended).toEqual([span]);
    expect(span.endTime).toEqual(span.startTime);
    expect(span.duration).toEqual([0, 0]);
  });

  it('keeps the nanoseconds of a duration measured by the monotonic clock', () => {
    const now = vi
      .spyOn(performance, 'now')
      .mockReturnValueOnce(1_000)
      .mockReturnValueOnce(1_000.000123);
    try {
      const span = new RecordedSpan(
        sink([]),
        'GET',
        SpanKind.CLIENT,
        context(CLIENT),
        undefined,
        {},
      );
      span.end();
      expect(span.duration).toEqual([0, 123]);
      expect(span.endTime).toEqual([span.startTime[0], span.startTime[1] + 123]);
    } finally {
      now.mockRestore();
    }
  });
});

describe('the times of a recorded span, encoded without their arrays', () => {
  it('are the bytes of its startTime and endTime, at fractions, carries and large epochs', () => {
    /** The same span through the encoder's general path (not a RecordedSpan). */
    const general = (span: RecordedSpan): ReadableSpan => ({
      name: span.name,
      kind: span.kind,
      spanContext: () => span.spanContext(),
      parentSpanContext: span.parentSpanContext,
      startTime: span.startTime,
      endTime: span.endTime,
      duration: span.duration,
      status: span.status,
      attributes: span.attributes,
      links: span.links,
      events: span.events,
      ended: true,
      resource: span.resource,
      instrumentationScope: span.instrumentationScope,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    });
    const starts = [
      1_700_000_000_123,
      1_700_000_000_123 + 0.4567,
      1_700_000_000_999 + 0.9999,
      4_294_967_295_999.5,
    ];
    const elapsed = [0, 0.0004, 0.5, 1.2345, 999.9999, 86_400_000.5];
    for (const start of starts) {
      for (const e of elapsed) {
        const ended: ReadableSpan[] = [];
        const span = waitSpan(ended, start);
        span.end(start + e);
        const fast = new SpanBatch();
        fast.add(span);
        const slow = new SpanBatch();
        slow.add(general(span));
        expect(Buffer.from(fast.bytes()).equals(Buffer.from(slow.bytes())), `${start} + ${e}`).toBe(
          true,
        );
      }
    }
  });
});
