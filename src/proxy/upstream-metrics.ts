/**
 * The per-request upstream metrics with their prom-client children (`labels()`) kept per (method,
 * status), as prom-client's docs advise for hot paths (bounded: 8 method labels × statuses seen).
 */
import type { Counter, Histogram, LabelValues } from 'prom-client';
import type { SidecarMetrics } from '../telemetry/metrics.js';

export type ForwarderMetrics = Pick<
  SidecarMetrics,
  'upstreamRequests' | 'upstreamRequestDuration' | 'upstreamUnauthorized'
>;

const METHOD_LABELS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Bounded label values: a client can send any method token. */
export function methodLabel(method: string): string {
  return METHOD_LABELS.has(method) ? method : 'other';
}

export class UpstreamMetrics {
  readonly #durationOf = new Map<string, Histogram.Internal<'method'>>();
  readonly #countOf = new Map<string, Map<number | 'error', Counter.Internal>>();

  constructor(readonly metrics: ForwarderMetrics) {}

  /** `traceId`: the request's sampled trace, the bucket's exemplar (tracing on). */
  observeDuration(method: string, seconds: number, traceId?: string): void {
    let child = this.#durationOf.get(method);
    if (child === undefined) {
      child = this.metrics.upstreamRequestDuration.labels({ method });
      this.#durationOf.set(method, child);
    }
    if (traceId === undefined) child.observe(seconds);
    else {
      this.metrics.upstreamRequestDuration.observe({
        labels: { method },
        value: seconds,
        // prom-client types exemplar labels as the metric's own label names.
        exemplarLabels: { trace_id: traceId } as LabelValues<string>,
      });
    }
  }

  count(method: string, code: number | 'error'): void {
    let byCode = this.#countOf.get(method);
    if (byCode === undefined) {
      byCode = new Map();
      this.#countOf.set(method, byCode);
    }
    let child = byCode.get(code);
    if (child === undefined) {
      child = this.metrics.upstreamRequests.labels({ method, code: String(code) });
      byCode.set(code, child);
    }
    child.inc();
  }
}
