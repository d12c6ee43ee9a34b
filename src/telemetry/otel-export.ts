/**
 * OpenTelemetry's OTLP exporter, wrapped (docs/reference.md "Traces"): the spans of a failed
 * export are counted as dropped, by reason, and the failure is logged at most once a minute (with
 * how many failed since), never per batch and never with the headers (they may hold an API key).
 */
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPExporterError } from '@opentelemetry/otlp-exporter-base';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import type { DroppedSpans, DropReason, TracingDeps } from './tracing.js';

/** An exporter that keeps failing is logged at most this often. */
export const EXPORT_FAILURE_LOG_MS = 60_000;

/**
 * `refused`: the collector answered with an error status (400, 413, 500, ...; 429 and 502–504 once
 * the exporter's retries are spent): OpenTelemetry's exporter reports these as `OTLPExporterError`.
 * `export_failed`: no answer (connection refused or reset, timed out).
 */
export function dropReason(error: Error | undefined): DropReason {
  return error instanceof OTLPExporterError ? 'refused' : 'export_failed';
}

export class LoggedExporter implements SpanExporter {
  #failures = 0;
  #lastLog = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly inner: SpanExporter,
    private readonly logger: TracingDeps['logger'],
    private readonly dropped: DroppedSpans,
    private readonly now: () => number = Date.now,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) this.#failed(spans.length, result.error);
      done(result);
    });
  }

  #failed(count: number, error: Error | undefined): void {
    this.dropped.inc({ reason: dropReason(error) }, count);
    this.#failures += 1;
    const now = this.now();
    if (now - this.#lastLog < EXPORT_FAILURE_LOG_MS) return;
    this.#lastLog = now;
    this.logger.warn(
      { failures: this.#failures, reason: error?.message ?? 'unknown' },
      'span export failed; spans are dropped until the collector answers (logged once a minute)',
    );
    this.#failures = 0;
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
