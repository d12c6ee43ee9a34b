/**
 * The per-request upstream metrics with their children looked up once per (method, status):
 * prom-client hashes the label object on every call (bounded: 8 method labels × statuses seen).
 */
import type { LeanHistogramChild } from '../telemetry/lean-metrics.js';
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
  readonly #durationOf = new Map<string, LeanHistogramChild>();
  readonly #countOf = new Map<string, Map<number | 'error', { inc(): void }>>();

  constructor(readonly metrics: ForwarderMetrics) {}

  /** `traceId`: the request's sampled trace, the bucket's exemplar (tracing on). */
  observeDuration(method: string, seconds: number, traceId?: string): void {
    let child = this.#durationOf.get(method);
    if (child === undefined) {
      child = this.metrics.upstreamRequestDuration.labels({ method });
      this.#durationOf.set(method, child);
    }
    child.observe(seconds, traceId);
  }

  count(method: string, code: number | 'error'): void {
    let byCode = this.#countOf.get(method);
    if (byCode === undefined) {
      byCode = new Map();
      this.#countOf.set(method, byCode);
    }
    let child = byCode.get(code);
    if (child === undefined) {
      child = this.metrics.upstreamRequests.child({ method, code: String(code) });
      byCode.set(code, child);
    }
    child.inc();
  }
}
