import { Counter, Histogram } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetricsRegistry, expose as exposeRegistry } from './exposition.js';

function setup() {
  const registry = createMetricsRegistry();
  const counter = new Counter({
    name: 'x_requests_total',
    help: 'Requests.',
    labelNames: ['code'] as const,
    registers: [registry],
  });
  const histogram = new Histogram({
    name: 'x_seconds',
    help: 'Time.',
    labelNames: ['method'] as const,
    buckets: [0.1, 1],
    enableExemplars: true,
    registers: [registry],
  });
  counter.labels({ code: '200' }).inc();
  histogram.labels({ method: 'GET' }).observe(0.05);
  histogram.observe({
    labels: { method: 'GET' },
    value: 0.5,
    exemplarLabels: { trace_id: 'abc' } as Record<string, string>,
  });
  return { expose: (accept: string | undefined) => exposeRegistry(registry, accept) };
}

const OPENMETRICS = 'application/openmetrics-text; version=1.0.0,text/plain;q=0.5';

describe('expose', () => {
  it('answers Prometheus text unless OpenMetrics is asked for', async () => {
    const { expose } = setup();
    const text = await expose(undefined);
    expect(text.contentType).toContain('text/plain; version=0.0.4');
    expect(text.body).toContain('# TYPE x_requests_total counter\nx_requests_total{code="200"} 1');
    expect(text.body).not.toContain('trace_id');
    const open = await expose(OPENMETRICS);
    expect(open.contentType).toContain('application/openmetrics-text');
    expect(open.body).toContain('# TYPE x_requests counter\nx_requests_total{code="200"} 1');
    expect(open.body).toMatch(
      /x_seconds_bucket\{le="1",method="GET"\} 2 # \{trace_id="abc"\} 0\.5 /,
    );
    expect(open.body.endsWith('# EOF\n')).toBe(true);
  });

  it('keeps the counter families named with _total in a text scrape after an OpenMetrics one', async () => {
    const { expose } = setup();
    const both = await Promise.all([
      expose(OPENMETRICS),
      expose('text/plain'),
      expose(OPENMETRICS),
    ]);
    expect(both[1].body).toContain('# TYPE x_requests_total counter');
    expect((await expose(undefined)).body).toContain('# TYPE x_requests_total counter');
    expect((await expose(OPENMETRICS)).body).toContain('# TYPE x_requests counter');
  });
});
