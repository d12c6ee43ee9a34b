import { Registry, collectDefaultMetrics } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerProcessMetrics } from './process-metrics.js';

describe('registerProcessMetrics', () => {
  it("exports prom-client's default metrics under their names, but the three left out on purpose", async () => {
    const ours = new Registry();
    registerProcessMetrics(ours, 'p_');
    const theirs = new Registry();
    collectDefaultMetrics({ register: theirs, prefix: 'p_' });
    const names = async (r: Registry) => (await r.getMetricsAsJSON()).map((m) => m.name).sort();
    const leftOut = [
      'p_nodejs_gc_duration_seconds',
      'p_nodejs_active_handles',
      'p_nodejs_active_handles_total',
      'p_nodejs_active_requests',
      'p_nodejs_active_requests_total',
    ];
    expect(await names(ours)).toEqual((await names(theirs)).filter((n) => !leftOut.includes(n)));
    const text = await ours.metrics();
    expect(text).toMatch(/^p_process_resident_memory_bytes \d+/m);
    expect(text).toMatch(/^p_process_cpu_seconds_total \d/m);
    expect(text).toMatch(/^p_nodejs_heap_space_size_used_bytes\{space="new"\} \d+/m);
  });
});
