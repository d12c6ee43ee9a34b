import type { TracingConfig } from '../config/types.js';
import type { Tracing, TracingDeps } from './tracing.js';

/** Load and start the OpenTelemetry part (lazily: never imported when tracing is off). */
export async function startTracing(config: TracingConfig, deps: TracingDeps): Promise<Tracing> {
  const { createTracing } = await import('./otel.js');
  return createTracing(config, deps);
}
