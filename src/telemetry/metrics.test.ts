import { describe, expect, it } from 'vitest';
import { createMetricsRegistry, expose } from './exposition.js';
import { createMetrics } from './metrics.js';

describe('createMetrics', () => {
  it("exports prom-client's default process metrics under the sidecar's prefix, in both formats", async () => {
    const registry = createMetricsRegistry();
    createMetrics({ registry });
    const text = (await expose(registry, undefined)).body;
    // The names docs/reference.md, the dashboard and bench/soak.mjs read.
    expect(text).toMatch(/^oauth_sidecar_process_resident_memory_bytes \d+/m);
    expect(text).toMatch(/^oauth_sidecar_process_cpu_seconds_total \d/m);
    expect(text).toMatch(/^oauth_sidecar_nodejs_heap_size_used_bytes \d+/m);
    expect(text).toMatch(/^oauth_sidecar_nodejs_heap_space_size_used_bytes\{space="new"\} \d+/m);
    expect(text).toMatch(/^oauth_sidecar_nodejs_eventloop_lag_max_seconds \d/m);
    expect(text).toMatch(/^oauth_sidecar_nodejs_active_handles_total \d+/m);
    expect(text).toContain('# TYPE oauth_sidecar_nodejs_gc_duration_seconds histogram');
    const open = (await expose(registry, 'application/openmetrics-text')).body;
    expect(open).toContain('# TYPE oauth_sidecar_process_cpu_seconds counter');
    expect(open).toMatch(/^oauth_sidecar_process_cpu_seconds_total \d/m);
  });

  it('registers no process metric when told not to', async () => {
    const registry = createMetricsRegistry();
    createMetrics({ registry, defaultMetrics: false });
    expect((await expose(registry, undefined)).body).not.toContain('process_');
  });
});
