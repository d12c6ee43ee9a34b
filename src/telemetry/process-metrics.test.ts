import { Registry, collectDefaultMetrics } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { PROCESS_METRICS, registerProcessMetrics } from './process-metrics.js';

const names = (registry: Registry): string[] =>
  registry
    .getMetricsAsArray()
    .map((metric) => metric.name)
    .sort();

describe("the process metrics: prom-client's default metrics modules by path", () => {
  it("are collectDefaultMetrics' modules, every one but gc", () => {
    expect([...Object.keys(PROCESS_METRICS), 'gc'].sort()).toEqual(
      [...collectDefaultMetrics.metricsList].sort(),
    );
  });

  it('register every name collectDefaultMetrics does but the GC histogram', () => {
    const ours = new Registry();
    registerProcessMetrics(ours, 'p_');
    const theirs = new Registry();
    collectDefaultMetrics({ register: theirs, prefix: 'p_' });
    expect(names(ours)).toEqual(
      names(theirs).filter((name) => name !== 'p_nodejs_gc_duration_seconds'),
    );
    expect(names(ours)).toContain('p_process_cpu_seconds_total');
  });
});
