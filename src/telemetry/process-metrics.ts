/**
 * The process metrics: prom-client's own `collectDefaultMetrics` modules (CPU, memory, event-loop
 * lag, heap and heap spaces, open fds, active handles, requests and resources, version), all but
 * its GC histogram, whose `PerformanceObserver` runs on every scavenge of the 2 MiB young
 * generation (docs/design.md "Exceptions"). The rest is prom-client's code as is.
 */
import type { Registry, RegistryContentType } from 'prom-client';
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

/** `collectDefaultMetrics`' modules in its order, without `gc`. */
export const PROCESS_METRICS = {
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
} as const;

/** Register the process metrics on `registry` under `prefix`, as `collectDefaultMetrics` would. */
export function registerProcessMetrics(
  registry: Registry<RegistryContentType>,
  prefix: string,
): void {
  // prom-client's own default precision of the event-loop delay monitor (ms).
  const config = { prefix, eventLoopMonitoringPrecision: 10 };
  for (const register of Object.values(PROCESS_METRICS)) register(registry, config);
}
