import { Registry, collectDefaultMetrics } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_COLLECTORS,
  LEFT_OUT_COLLECTORS,
  registerDefaultMetrics,
} from './default-metrics.js';

describe('registerDefaultMetrics', () => {
  it("covers prom-client's list of default collectors, every one but those left out on purpose", () => {
    // An upgrade of prom-client that adds, renames or moves a collector fails here.
    expect([...Object.keys(DEFAULT_COLLECTORS), ...LEFT_OUT_COLLECTORS].sort()).toEqual(
      [...collectDefaultMetrics.metricsList].sort(),
    );
  });

  it('registers what collectDefaultMetrics registers, but the GC histogram', async () => {
    const ours = new Registry();
    registerDefaultMetrics(ours, 'p_');
    const theirs = new Registry();
    collectDefaultMetrics({ register: theirs, prefix: 'p_' });
    const names = async (r: Registry) => (await r.getMetricsAsJSON()).map((m) => m.name).sort();
    const expected = (await names(theirs)).filter((n) => n !== 'p_nodejs_gc_duration_seconds');
    expect(await names(theirs)).toContain('p_nodejs_gc_duration_seconds');
    expect(await names(ours)).toEqual(expected);
    expect(await names(ours)).toContain('p_process_resident_memory_bytes');
    expect(await names(ours)).toContain('p_nodejs_eventloop_lag_seconds');
  });
});
