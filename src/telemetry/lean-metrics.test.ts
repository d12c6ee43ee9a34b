import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LeanCounter, LeanHistogram, LeanRegistry } from './lean-metrics.js';

/** The exposition's lines; the order of series is not part of it. */
const lines = (text: string) => text.split('\n').sort();

describe('LeanCounter', () => {
  it("exposes what prom-client's Counter exposes, through its collect hook, and resets the same way", async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const options = { name: 'x_total', help: 'Count.', labelNames: ['method', 'code'] as const };
    const reference = new Counter({ ...options, registers: [theirs] });
    const lean = new LeanCounter({ ...options, registers: [ours] });
    const ok = lean.child({ method: 'GET', code: '200' });
    for (let i = 0; i < 3; i++) {
      ok.inc();
      reference.inc({ method: 'GET', code: '200' });
    }
    lean.inc({ method: 'POST', code: 'error' }, 2);
    reference.inc({ method: 'POST', code: 'error' }, 2);
    expect(lines(await ours.metrics())).toEqual(lines(await theirs.metrics()));
    ours.resetMetrics();
    reference.reset();
    ok.inc();
    reference.inc({ method: 'GET', code: '200' });
    expect(lines(await ours.metrics())).toEqual(lines(await theirs.metrics()));
  });
});

describe('LeanHistogram on a LeanRegistry', () => {
  it("exposes exactly what prom-client's Histogram exposes for the same observations, and resets", async () => {
    const buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
    const theirs = new Registry();
    const reference = new Histogram({
      name: 'x_seconds',
      help: 'Time.',
      buckets,
      labelNames: ['method'],
      registers: [theirs],
    });
    const ours = new LeanRegistry();
    const lean = new LeanHistogram('x_seconds', 'Time.', 'method', buckets);
    ours.attach(lean);
    const get = lean.labels({ method: 'GET' });
    for (const v of [0, 0.005, 0.0051, 0.02, 0.7, 1, 29.9, 30, 31, 1e9, 0.1]) {
      reference.observe({ method: 'GET' }, v);
      get.observe(v);
    }
    reference.observe({ method: 'POST' }, 0.3);
    lean.observe({ method: 'POST' }, 0.3);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    ours.resetMetrics();
    reference.reset();
    get.observe(0.04);
    reference.observe({ method: 'GET' }, 0.04);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});

describe('OpenMetrics (exemplars)', () => {
  it("names the families as prom-client's OpenMetrics registry does, and ends with # EOF", async () => {
    const theirs = new Registry<typeof Registry.OPENMETRICS_CONTENT_TYPE>();
    theirs.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
    const ours = new LeanRegistry();
    const counter = { name: 'y_total', help: 'Count.', labelNames: ['code'] as const };
    new Counter({ ...counter, registers: [theirs] }).inc({ code: '200' }, 3);
    new Counter({ ...counter, registers: [ours] }).inc({ code: '200' }, 3);
    const histogram = {
      name: 'z_seconds',
      help: 'Time.',
      buckets: [0.1, 1],
      labelNames: ['method'],
    };
    new Histogram({ ...histogram, registers: [theirs] }).observe({ method: 'GET' }, 0.5);
    new Histogram({ ...histogram, registers: [ours] }).observe({ method: 'GET' }, 0.5);
    const expected = await theirs.metrics();
    const actual = await ours.openMetrics();
    expect(actual.endsWith('# EOF\n')).toBe(true);
    expect(lines(actual)).toEqual(lines(expected));
  });

  it("a lean histogram carries the trace id of each bucket's last sampled observation, only in OpenMetrics", async () => {
    const registry = new LeanRegistry();
    const histogram = new LeanHistogram('d_seconds', 'Time.', 'method', [0.1, 1]);
    registry.attach(histogram);
    const child = histogram.labels({ method: 'GET' });
    child.observe(0.05, 'a'.repeat(32));
    child.observe(0.07);
    child.observe(0.5, 'b'.repeat(32));
    const open = await registry.openMetrics();
    expect(open).toMatch(
      new RegExp(
        `d_seconds_bucket\\{le="0.1",method="GET"\\} 2 # \\{trace_id="${'a'.repeat(32)}"\\} 0.05 \\d+\\.\\d{3}`,
      ),
    );
    expect(open).toMatch(
      new RegExp(
        `d_seconds_bucket\\{le="1",method="GET"\\} 3 # \\{trace_id="${'b'.repeat(32)}"\\} 0.5 `,
      ),
    );
    expect(open).toContain('d_seconds_bucket{le="+Inf",method="GET"} 3\n');
    expect(await registry.metrics()).not.toContain('trace_id');
  });
});
