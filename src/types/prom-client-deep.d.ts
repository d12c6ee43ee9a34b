/**
 * prom-client's default process metrics, one module each, imported by path so that the GC
 * histogram's module is never run (docs/design.md "Exceptions"). prom-client has no `exports` map,
 * so the paths resolve; `src/telemetry/process-metrics.test.ts` checks that they register every
 * name `collectDefaultMetrics` does but `nodejs_gc_duration_seconds`, so an upgrade that moves or
 * adds one fails there. package.json pins prom-client to `~15.1.3`.
 */
declare module 'prom-client/lib/metrics/*.js' {
  import type { Registry, RegistryContentType } from 'prom-client';
  /** Registers the metric on `registry` (prom-client's global one when absent). */
  const register: (
    registry: Registry<RegistryContentType> | undefined,
    config: { prefix?: string; eventLoopMonitoringPrecision?: number },
  ) => void;
  export default register;
}
