/**
 * prom-client's default-metric collectors, one module each, imported by path so that the sidecar
 * can register all of them but the GC histogram (src/telemetry/default-metrics.ts). prom-client
 * has no `exports` map, so the paths resolve; `src/telemetry/default-metrics.test.ts` checks the
 * list against `collectDefaultMetrics.metricsList`, so an upgrade that adds, renames or moves one
 * fails there. package.json pins prom-client to `~15.1`.
 */
declare module 'prom-client/lib/metrics/*' {
  import type { Registry } from 'prom-client';
  /** Registers the metric (and its collect callback or observer) in `registry`. */
  const register: (
    registry: Registry | undefined,
    config: { prefix?: string; eventLoopMonitoringPrecision?: number },
  ) => void;
  export default register;
}
