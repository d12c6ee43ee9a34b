/** The per-request upstream metrics: bounded method labels, and the children kept per label. */
import { describe, expect, it } from 'vitest';
import { createMetricsRegistry } from '../telemetry/exposition.js';
import { createMetrics } from '../telemetry/metrics.js';
import { UpstreamMetrics, methodLabel } from './upstream-metrics.js';

describe('methodLabel', () => {
  it('keeps the standard methods and calls any other token "other"', () => {
    expect(['GET', 'DELETE', 'OPTIONS'].map(methodLabel)).toEqual(['GET', 'DELETE', 'OPTIONS']);
    expect(['BREW', 'get', 'PROPFIND'].map(methodLabel)).toEqual(['other', 'other', 'other']);
  });
});

describe('UpstreamMetrics', () => {
  it('counts by method and status or error, and observes durations with a trace exemplar when sampled', async () => {
    const sidecar = createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false });
    const metrics = new UpstreamMetrics(sidecar);
    metrics.count('GET', 200);
    metrics.count('GET', 200);
    metrics.count('GET', 'error');
    metrics.count('POST', 200);
    const counts = (await sidecar.upstreamRequests.get()).values.map((v) => [
      v.labels.method,
      v.labels.code,
      v.value,
    ]);
    expect(counts).toEqual(
      expect.arrayContaining([
        ['GET', '200', 2],
        ['GET', 'error', 1],
        ['POST', '200', 1],
      ]),
    );
    metrics.observeDuration('GET', 0.02);
    metrics.observeDuration('GET', 0.02, '0af7651916cd43dd8448eb211c80319c');
    const count = (await sidecar.upstreamRequestDuration.get()).values.find(
      (v) => v.metricName?.endsWith('_count') === true && v.labels.method === 'GET',
    );
    expect(count?.value).toBe(2);
  });
});
