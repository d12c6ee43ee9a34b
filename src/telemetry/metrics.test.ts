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

  it('exposes the caller results counted in the tally, as totals at every scrape', async () => {
    const registry = createMetricsRegistry();
    const metrics = createMetrics({ registry, defaultMetrics: false });
    const counts = metrics.callerAuth({ ageSeconds: () => 7 });
    const scrape = async () => (await expose(registry, undefined)).body;
    // Registered before the first request: the names exist, no result has a value yet.
    expect(await scrape()).toContain('# TYPE oauth_sidecar_caller_auth_total counter');
    expect(await scrape()).not.toMatch(/^oauth_sidecar_caller_auth_total\{/m);
    counts.count('verified');
    counts.count('remembered');
    counts.count('remembered');
    const first = await scrape();
    expect(first).toMatch(/^oauth_sidecar_caller_auth_total\{result="verified"\} 1$/m);
    expect(first).toMatch(/^oauth_sidecar_caller_auth_total\{result="remembered"\} 2$/m);
    expect(first).toMatch(/^oauth_sidecar_caller_keys_age_seconds 7$/m);
    // A scrape reads the totals; it adds nothing of its own.
    counts.count('remembered');
    counts.count('expired');
    const second = await scrape();
    expect(second).toMatch(/^oauth_sidecar_caller_auth_total\{result="verified"\} 1$/m);
    expect(second).toMatch(/^oauth_sidecar_caller_auth_total\{result="remembered"\} 3$/m);
    expect(second).toMatch(/^oauth_sidecar_caller_auth_total\{result="expired"\} 1$/m);
    expect(await scrape()).toBe(second);
    const open = (await expose(registry, 'application/openmetrics-text')).body;
    expect(open).toMatch(/^oauth_sidecar_caller_auth_total\{result="remembered"\} 3$/m);
  });

  it('registers the caller metrics once: a second call counts in the same tally', async () => {
    const registry = createMetricsRegistry();
    const metrics = createMetrics({ registry, defaultMetrics: false });
    const counts = metrics.callerAuth({ ageSeconds: () => 0 });
    expect(metrics.callerAuth({ ageSeconds: () => 0 })).toBe(counts);
    counts.count('forbidden');
    expect((await expose(registry, undefined)).body).toMatch(
      /^oauth_sidecar_caller_auth_total\{result="forbidden"\} 1$/m,
    );
  });
});
