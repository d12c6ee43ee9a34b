import { SpanKind, TraceFlags, type SpanContext } from '@opentelemetry/api';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { SpanBatch, exportRequest } from './otlp-protobuf.js';
import { ERROR, RecordedSpan, type SpanSink } from './recorded-span.js';

const ended: ReadableSpan[] = [];
const sink: SpanSink = {
  resource: resourceFromAttributes({ 'service.name': 'oauth-sidecar' }),
  instrumentationScope: { name: 'oauth-sidecar', version: '1.2.3' },
  onEnd: (span) => ended.push(span),
};

const server: SpanContext = {
  traceId: '0af7651916cd43dd8448eb211c80319c',
  spanId: 'b7ad6b7169203331',
  traceFlags: TraceFlags.SAMPLED,
};
const remote: SpanContext = { ...server, spanId: '00f067aa0ba902b7', isRemote: true };
const child: SpanContext = { ...server, spanId: '53995c3f42cd8ad8' };

describe('spans recorded by the sidecar', () => {
  it('serialise as the SDK spans they stand for, in protobuf (ours and OpenTelemetry’s) and JSON', () => {
    ended.length = 0;
    const request = new RecordedSpan(sink, 'GET /v1.0/', SpanKind.SERVER, server, remote, {
      'http.request.method': 'GET',
      'url.path': '/v1.0/contracts/',
    });
    new RecordedSpan(
      sink,
      'quota.wait',
      SpanKind.INTERNAL,
      { ...child, spanId: '1111111111111111' },
      server,
      {},
      1_700_000_000_123,
    ).end(1_700_000_000_456.5);
    const attempt = new RecordedSpan(sink, 'GET', SpanKind.CLIENT, child, server, {
      'server.address': 'api.example',
      'server.port': 443,
    });
    attempt.attributes['http.response.status_code'] = 502;
    attempt.attributes['error.type'] = '502';
    attempt.status = ERROR;
    attempt.end();
    request.end();
    request.end();
    expect(ended).toHaveLength(3);

    const batch = new SpanBatch();
    for (const span of ended) batch.add(span);
    const ours = Buffer.from(exportRequest(batch));
    expect(ours.equals(Buffer.from(ProtobufTraceSerializer.serializeRequest(ended)!))).toBe(true);

    const json = JSON.parse(Buffer.from(JsonTraceSerializer.serializeRequest(ended)!).toString());
    const spans = json.resourceSpans[0].scopeSpans[0].spans;
    expect(json.resourceSpans[0].scopeSpans[0].scope).toEqual({
      name: 'oauth-sidecar',
      version: '1.2.3',
    });
    expect(spans[0]).toMatchObject({
      name: 'quota.wait',
      parentSpanId: server.spanId,
      startTimeUnixNano: '1700000000123000000',
      endTimeUnixNano: '1700000000456500000',
    });
    expect(spans[1]).toMatchObject({ name: 'GET', kind: 3, status: { code: 2 } });
    expect(spans[2]).toMatchObject({ name: 'GET /v1.0/', kind: 2, parentSpanId: remote.spanId });
    const start = BigInt(spans[2].startTimeUnixNano);
    const end = BigInt(spans[2].endTimeUnixNano);
    expect(end >= start).toBe(true);
    expect(Number(start / 1_000_000n)).toBeLessThanOrEqual(Date.now());
  });
});
