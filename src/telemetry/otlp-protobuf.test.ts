import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  defaultTextMapGetter,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { SpanBatch, SpanBuffers } from './otlp-protobuf.js';

/** A tracer provider whose ended spans go to `onEnd`. */
function endingInto(onEnd: (span: ReadableSpan) => void, resource?: Resource): TracerProvider {
  return new TracerProvider({
    ...(resource && { resource }),
    spanProcessors: [
      { onStart: () => {}, onEnd, forceFlush: async () => {}, shutdown: async () => {} },
    ],
  });
}

/** Real SDK spans of every shape the sidecar makes, and a few it does not. */
function endedSpans(): ReadableSpan[] {
  const ended: ReadableSpan[] = [];
  const provider = endingInto(
    (span) => ended.push(span),
    resourceFromAttributes({ 'service.name': 'oauth-sidecar', 'k8s.pod.name': 'pod-1' }),
  );
  const tracer = provider.getTracer('oauth-sidecar', '1.2.3');
  const parent = new W3CTraceContextPropagator().extract(
    ROOT_CONTEXT,
    {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      tracestate: 'vendor=value,other=1',
    },
    defaultTextMapGetter,
  );
  const server = tracer.startSpan('GET /v1.0/contracts/', { kind: SpanKind.SERVER }, parent);
  server.setAttributes({
    'http.request.method': 'GET',
    'url.path': '/v1.0/contracts/ünïcode',
    'http.request.header.x-request-id': ['r-1'],
    'http.response.status_code': 503,
    ratio: 0.25,
    negative: -7,
    large: 2 ** 40 + 3,
    flag: true,
    long: 'x'.repeat(20_000),
  });
  server.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream failed' });
  server.addEvent('retry', { attempt: 2, reason: 'reset' }, 1_700_000_000_500);
  server.addEvent('bare');
  server.addLink({ context: trace.getSpanContext(parent)!, attributes: { kind: 'caller' } });
  server.addLink({ context: trace.getSpanContext(parent)! });
  const child = tracer.startSpan(
    'GET',
    { kind: SpanKind.CLIENT, attributes: { 'server.port': 443 } },
    trace.setSpan(ROOT_CONTEXT, server),
  );
  child.end();
  server.end();
  tracer.startSpan('oauth.token', { kind: SpanKind.CLIENT, startTime: 1_700_000_000_123 }).end();
  tracer
    .startSpan('quota.wait', { startTime: [4_294_967_295, 999_999_999] })
    .end([4_294_967_296, 1]);
  return ended;
}

describe('OTLP protobuf spans', () => {
  it('are byte for byte what OpenTelemetry serialises for the same spans', () => {
    const spans = endedSpans();
    const batch = new SpanBatch();
    for (const span of spans) batch.add(span);
    expect(batch.count).toBe(spans.length);
    const ours = Buffer.from(batch.request());
    const theirs = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
    expect(ours.length).toBeGreaterThan(20_000);
    expect(ours.equals(theirs)).toBe(true);
  });

  it('grow past the first buffer without losing a byte', () => {
    const spans = endedSpans();
    const batch = new SpanBatch();
    const many: ReadableSpan[] = [];
    for (let i = 0; i < 40; i++) many.push(...spans);
    for (const span of many) batch.add(span);
    const theirs = Buffer.from(ProtobufTraceSerializer.serializeRequest(many)!);
    expect(Buffer.from(batch.request()).equals(theirs)).toBe(true);
  });

  it('a short string at the end of the buffer survives the buffer growing', () => {
    // Spans of short strings, after a first span of every length 0..199: at some length a short
    // string ends within the last bytes before the 64 KiB buffer grows, wherever that falls.
    const provider = endingInto((span) => ended.push(span));
    const ended: ReadableSpan[] = [];
    const tracer = provider.getTracer('t');
    for (let pad = 0; pad < 200; pad++) {
      ended.length = 0;
      tracer.startSpan('p', { attributes: { p: 'x'.repeat(pad) } }).end();
      for (let i = 0; i < 1000; i++)
        tracer.startSpan('a', { attributes: { b: 'c', d: 'e' } }).end();
      const batch = new SpanBatch();
      for (const span of ended) batch.add(span);
      const theirs = Buffer.from(ProtobufTraceSerializer.serializeRequest(ended)!);
      expect(Buffer.from(batch.request()).equals(theirs), `pad ${pad}`).toBe(true);
    }
  });

  it('the buffer of a released batch carries the next batches, each request still the bytes of the SDK', () => {
    const spans = endedSpans();
    const theirs = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
    const buffers = new SpanBuffers(2);
    const first = new SpanBatch(buffers);
    for (const span of spans) first.add(span);
    const firstRequest = first.request();
    expect(Buffer.from(firstRequest).equals(theirs)).toBe(true);
    first.release();
    first.release();
    expect(buffers.free).toBe(1);
    const second = new SpanBatch(buffers);
    expect(buffers.free).toBe(0);
    for (const span of spans.slice(1)) second.add(span);
    const request = second.request();
    // The same memory as the first request: no new buffer for the second batch.
    expect(request.buffer).toBe(firstRequest.buffer);
    const expected = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans.slice(1))!);
    expect(Buffer.from(request).equals(expected)).toBe(true);
    second.release();
    const unsent = new SpanBatch(buffers);
    unsent.release();
    expect(() => unsent.add(spans[0]!)).toThrow(/after release/);
  });

  it('keeps at most its bound of buffers, and none grown past 1 MiB', () => {
    const buffers = new SpanBuffers(2);
    const batches = [1, 2, 3].map(() => new SpanBatch(buffers));
    for (const batch of batches) batch.release();
    expect(buffers.free).toBe(2);
    const provider = endingInto((span) => huge.add(span));
    const huge = new SpanBatch(buffers);
    const tracer = provider.getTracer('t');
    for (let i = 0; i < 60; i++)
      tracer.startSpan('h', { attributes: { h: 'x'.repeat(20_000) } }).end();
    huge.release();
    expect(buffers.free).toBe(1);
  });

  it('an envelope too large for the head room is copied, with the same bytes', () => {
    const provider = endingInto(
      (span) => ended.push(span),
      resourceFromAttributes({ 'service.name': 's', big: 'y'.repeat(5_000) }),
    );
    const ended: ReadableSpan[] = [];
    for (let i = 0; i < 3; i++) provider.getTracer('t', '1').startSpan(`s${i}`).end();
    const batch = new SpanBatch();
    for (const span of ended) batch.add(span);
    const theirs = Buffer.from(ProtobufTraceSerializer.serializeRequest(ended)!);
    expect(Buffer.from(batch.request()).equals(theirs)).toBe(true);
  });

  it('the head room exactly full, one byte short, tiny requests, and a request made twice', () => {
    const spansWith = (resourcePad: number, spanPad: number, scope = 't'): ReadableSpan[] => {
      const ended: ReadableSpan[] = [];
      const provider = endingInto(
        (span) => ended.push(span),
        resourceFromAttributes({
          's.n': 's',
          ...(resourcePad > 0 && { r: 'y'.repeat(resourcePad) }),
        }),
      );
      const tracer = provider.getTracer(scope, '1');
      tracer.startSpan('n', { attributes: { a: 'x'.repeat(spanPad) } }).end();
      return ended;
    };
    const buffers = new SpanBuffers(2);
    const heads = new Set<number>();
    const cases = [
      [0, 0],
      [0, 150],
      [0, 16_300],
    ];
    // Resources around the 2 KiB head room: at one of them the request starts at the buffer's
    // first byte, at the next it no longer fits and is copied.
    for (let pad = 1_950; pad < 2_060; pad++) cases.push([pad, 0], [pad, 20_000]);
    for (const [resourcePad, spanPad] of cases) {
      const spans = spansWith(resourcePad!, spanPad!, resourcePad! % 2 ? 'odd' : 'even');
      const batch = new SpanBatch(buffers);
      for (const span of spans) batch.add(span);
      const theirs = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
      const request = batch.request();
      heads.add(request.byteOffset);
      expect(Buffer.from(request).equals(theirs), `${resourcePad}/${spanPad}`).toBe(true);
      expect(Buffer.from(batch.request()).equals(theirs)).toBe(true);
      expect(() => batch.add(spans[0]!)).toThrow(/already sent/);
      batch.release();
    }
    // Both paths ran: in place (down to offset 0) and copied (a buffer of its own, offset 0 too,
    // but not the pooled buffer's memory).
    expect(heads.has(0)).toBe(true);
    expect([...heads].some((offset) => offset > 0)).toBe(true);
  });

  it('an empty batch is an empty request', () => {
    expect(new SpanBatch().request().length).toBe(0);
  });
});
