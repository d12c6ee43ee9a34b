import {
  ROOT_CONTEXT,
  SpanKind,
  TraceFlags,
  defaultTextMapGetter,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
} from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import type { TracingConfig } from '../config/types.js';
import { createTracing } from './otel.js';

const config = (sampler: string): TracingConfig => ({
  url: 'http://127.0.0.1:9/v1/traces',
  protocol: 'http/protobuf',
  headers: {},
  serviceName: 'oauth-sidecar',
  resourceAttributes: {},
  sampler,
  samplerArg: 0.5,
  maxQueueSize: 2048,
  maxExportBatchSize: 512,
  scheduleDelayMs: 60_000,
  exportTimeoutMs: 1_000,
  recordQuery: false,
});

const deps = {
  logger: { warn: () => {} } as never,
  dropped: { inc: () => {} },
  pathPrefixes: ['/v1.0/'],
  upstream: 'https://api.example:8443',
  tokenUrl: 'https://auth.example/oauth/token',
  version: '0.0.0-test',
};

/** The SDK's samplers for each `OTEL_TRACES_SAMPLER` value (ratio 0.5). */
const SDK_SAMPLERS: Record<string, () => Sampler> = {
  always_on: () => new AlwaysOnSampler(),
  always_off: () => new AlwaysOffSampler(),
  traceidratio: () => new TraceIdRatioBasedSampler(0.5),
  parentbased_always_on: () => new ParentBasedSampler({ root: new AlwaysOnSampler() }),
  parentbased_always_off: () => new ParentBasedSampler({ root: new AlwaysOffSampler() }),
  parentbased_traceidratio: () =>
    new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.5) }),
};

/** `n` hex digits from a seeded generator (mulberry32): ids on both sides of a 0.5 ratio. */
function hex(n: number, seed: number): string {
  let a = seed * 0x9e3779b9;
  let out = '';
  while (out.length < n) {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out += (((t ^ (t >>> 14)) >>> 0) % 16).toString(16);
  }
  return out;
}

describe('spans recorded by the sidecar decide as the SDK does', () => {
  it.each(Object.keys(SDK_SAMPLERS))(
    '%s: the server span and its client child, with and without a sampled or unsampled parent',
    async (name) => {
      const ours = createTracing(config(name), deps);
      const sdkSampler = SDK_SAMPLERS[name]!();
      const sdk = new TracerProvider({ sampler: sdkSampler }).getTracer('t');
      const propagator = new W3CTraceContextPropagator();
      const seen = new Set<string>();
      for (let seed = 1; seed <= 40; seed++) {
        for (const flags of ['01', '00', undefined]) {
          const traceId = hex(32, seed);
          const headers =
            flags === undefined
              ? {}
              : { traceparent: `00-${traceId}-${hex(16, seed + 1)}-${flags}` };
          const parent = propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
          const request = ours.request(headers, 'GET', '/v1.0/contracts/');
          const attempt = request.attempt('GET', false);
          const [, sentTrace, sentSpan, sentFlags] = attempt.traceparent.split('-');
          if (flags !== undefined) expect(sentTrace).toBe(traceId);
          // The SDK's decision for this trace id: a server span, then a client span under it.
          const decision = sdkSampler.shouldSample(
            parent,
            sentTrace!,
            'GET /v1.0/',
            SpanKind.SERVER,
            {},
            [],
          ).decision;
          const serverSampled = decision === SamplingDecision.RECORD_AND_SAMPLED;
          const server = trace.setSpanContext(ROOT_CONTEXT, {
            traceId: sentTrace!,
            spanId: hex(16, seed + 2),
            traceFlags: serverSampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
          });
          const client = sdk.startSpan('GET', { kind: SpanKind.CLIENT }, server);
          const label = `${name} ${flags ?? 'no parent'} ${seed}`;
          expect(request.sampledTraceId !== undefined, label).toBe(serverSampled);
          seen.add(`${flags ?? 'none'}:${serverSampled}`);
          if (serverSampled) expect(request.sampledTraceId).toBe(sentTrace);
          expect(sentFlags, label).toBe(
            client.spanContext().traceFlags & TraceFlags.SAMPLED ? '01' : '00',
          );
          expect(sentSpan).toMatch(/^[0-9a-f]{16}$/);
          attempt.end(200);
          request.end(200);
        }
      }
      // The ratio samplers met trace ids on both sides of the bound, under a sampled parent too.
      if (name === 'traceidratio')
        expect(seen).toEqual(
          new Set(['01:true', '01:false', '00:true', '00:false', 'none:true', 'none:false']),
        );
      if (name === 'parentbased_traceidratio') expect(seen).toContain('none:false');
      await ours.shutdown(0);
    },
  );
});
