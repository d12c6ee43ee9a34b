/** The lazy door to OpenTelemetry: what it returns exports real spans to a real OTLP receiver. */
import { describe, expect, it } from 'vitest';
import { startOtlpReceiver } from '../../test/helpers/otlp-receiver.js';
import { startTracing } from './start-tracing.js';

describe('startTracing', () => {
  it('loads the SDK and returns tracing whose spans reach the endpoint on shutdown', async () => {
    const receiver = await startOtlpReceiver();
    try {
      const tracing = await startTracing(
        {
          url: `${receiver.url}/v1/traces`,
          protocol: 'http/protobuf',
          headers: {},
          serviceName: 'start-tracing-test',
          resourceAttributes: {},
          sampler: 'parentbased_always_on',
          samplerArg: 1,
          maxQueueSize: 64,
          maxExportBatchSize: 64,
          // No scheduled export: only shutdown() sends, so the test waits on nothing but it.
          scheduleDelayMs: 600_000,
          exportTimeoutMs: 10_000,
          recordQuery: false,
        },
        {
          logger: { warn: () => undefined } as never,
          dropped: { inc: () => undefined },
          pathPrefixes: ['/v1.0/'],
          upstream: 'https://api.example:8443',
          tokenUrl: 'https://auth.example/oauth/token',
          version: '0.0.0-test',
        },
      );
      const span = tracing.request({}, 'GET', '/v1.0/contracts/?a=1');
      expect(span.sampledTraceId).toMatch(/^[0-9a-f]{32}$/);
      span.end(200);
      await tracing.shutdown(10_000);
      expect(receiver.spans.map((s) => [s.name, s.traceId])).toEqual([
        ['GET /v1.0/', span.sampledTraceId],
      ]);
      expect(receiver.spans[0]!.resource['service.name']).toBe('start-tracing-test');
    } finally {
      await receiver.close();
    }
  });
});
