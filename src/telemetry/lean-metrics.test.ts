import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LeanCounter, LeanHistogram } from './lean-metrics.js';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

function pair() {
  const theirs = new Registry();
  const ours = new Registry();
  const options = { name: 'x_seconds', help: 'Time.', buckets: BUCKETS };
  const reference = new Histogram({ ...options, labelNames: ['method'], registers: [theirs] });
  const lean = new LeanHistogram({ ...options, labelName: 'method', registers: [ours] });
  return { theirs, ours, reference, lean };
}

describe('LeanHistogram', () => {
  it("exposes exactly what prom-client's Histogram exposes for the same observations", async () => {
    const { theirs, ours, reference, lean } = pair();
    const values = [0, 0.005, 0.0051, 0.02, 0.7, 1, 29.9, 30, 31, 1e9, 0.1];
    const get = lean.labels({ method: 'GET' });
    for (const v of values) {
      reference.observe({ method: 'GET' }, v);
      get.observe(v);
    }
    reference.observe({ method: 'POST' }, 0.3);
    lean.observe({ method: 'POST' }, 0.3);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('counts an observation on a bound in that bound (le is inclusive)', async () => {
    const { lean } = pair();
    lean.labels({ method: 'GET' }).observe(0.01);
    const metric = await lean.get();
    const le = (bound: number | string) =>
      metric.values.find((v) => v.metricName === 'x_seconds_bucket' && v.labels.le === bound)
        ?.value;
    expect(le(0.005)).toBe(0);
    expect(le(0.01)).toBe(1);
    expect(le('+Inf')).toBe(1);
  });

  it('reset zeroes every series and children kept before it go on counting', async () => {
    const { ours, theirs, reference, lean } = pair();
    const child = lean.labels({ method: 'GET' });
    child.observe(0.2);
    reference.observe({ method: 'GET' }, 0.2);
    ours.resetMetrics();
    reference.reset();
    child.observe(0.04);
    reference.observe({ method: 'GET' }, 0.04);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});

describe('LeanCounter', () => {
  it("exposes exactly what prom-client's Counter exposes, and resets the same way", async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const options = { name: 'x_total', help: 'Count.', labelNames: ['method', 'code'] as const };
    const reference = new Counter({ ...options, registers: [theirs] });
    const lean = new LeanCounter({ ...options, registers: [ours] });
    const ok = lean.labels({ method: 'GET', code: '200' });
    for (let i = 0; i < 3; i++) {
      ok.inc();
      reference.inc({ method: 'GET', code: '200' });
    }
    lean.inc({ method: 'POST', code: 'error' }, 2);
    reference.inc({ method: 'POST', code: 'error' }, 2);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    ours.resetMetrics();
    reference.reset();
    ok.inc();
    reference.inc({ method: 'GET', code: '200' });
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});
