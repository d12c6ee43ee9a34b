/**
 * prom-client's default process metrics, every one but the GC histogram
 * (`nodejs_gc_duration_seconds`), under the sidecar's prefix.
 *
 * The GC histogram observes every collection through a `PerformanceObserver`: node builds a
 * PerformanceEntry per collection with deprecated accessors (DEP0152) and delivers it in a
 * macrotask. Under load that is 100+ entries a second, about 1 µs per forwarded request in the
 * CPU profile, about 1 % of the sidecar's CPU (docs/benchmarks.md, "Timers and observers"), for
 * a figure the dashboard and alerts do not use: GC shows in CPU and event-loop lag, which stay.
 * `collectDefaultMetrics` has no switch for one collector, so the others are registered one by
 * one from prom-client's own modules (src/types/prom-client-deep.d.ts).
 */
import type { Registry } from 'prom-client';
import eventLoopLag from 'prom-client/lib/metrics/eventLoopLag.js';
import heapSizeAndUsed from 'prom-client/lib/metrics/heapSizeAndUsed.js';
import heapSpacesSizeAndUsed from 'prom-client/lib/metrics/heapSpacesSizeAndUsed.js';
import osMemoryHeap from 'prom-client/lib/metrics/osMemoryHeap.js';
import processCpuTotal from 'prom-client/lib/metrics/processCpuTotal.js';
import processHandles from 'prom-client/lib/metrics/processHandles.js';
import processMaxFileDescriptors from 'prom-client/lib/metrics/processMaxFileDescriptors.js';
import processOpenFileDescriptors from 'prom-client/lib/metrics/processOpenFileDescriptors.js';
import processRequests from 'prom-client/lib/metrics/processRequests.js';
import processResources from 'prom-client/lib/metrics/processResources.js';
import processStartTime from 'prom-client/lib/metrics/processStartTime.js';
import version from 'prom-client/lib/metrics/version.js';

/** prom-client's default collectors by its own names (`collectDefaultMetrics.metricsList`). */
export const DEFAULT_COLLECTORS = {
  processCpuTotal,
  processStartTime,
  osMemoryHeap,
  processOpenFileDescriptors,
  processMaxFileDescriptors,
  eventLoopLag,
  processResources,
  processHandles,
  processRequests,
  heapSizeAndUsed,
  heapSpacesSizeAndUsed,
  version,
};

/** The default collectors left out, and why (above). */
export const LEFT_OUT_COLLECTORS = ['gc'] as const;

/** Registers the default process metrics but the GC histogram, as `collectDefaultMetrics` would. */
export function registerDefaultMetrics(registry: Registry, prefix: string): void {
  // prom-client's defaults (collectDefaultMetrics): lag sampled with a 10 ms resolution.
  const config = { prefix, eventLoopMonitoringPrecision: 10 };
  for (const register of Object.values(DEFAULT_COLLECTORS)) register(registry, config);
}
