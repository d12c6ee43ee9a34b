/**
 * The batch span processor: OpenTelemetry's BatchSpanProcessor's rules (at most `maxQueueSize`
 * spans waiting, the rest dropped and counted; batches of `maxExportBatchSize` or what waited
 * `scheduleDelayMs`; one export at a time, each within `exportTimeoutMs`), over batches of either
 * kind: for protobuf each span is encoded as it ends (otlp-protobuf.ts), for JSON the spans are
 * kept. Both are sent by OpenTelemetry's own OTLP/HTTP exporters (retries, compression,
 * timeouts). Why not its processor: docs/benchmarks.md "Tracing".
 */
import { TraceFlags } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import {
  convertLegacyHttpOptions,
  createOtlpHttpExportDelegate,
} from '@opentelemetry/otlp-exporter-base/node-http';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace';
import type { TracingConfig } from '../config/types.js';
import type { SpanBatch } from './otlp-protobuf.js';

/** The spans of one export: encoded (`SpanBatch`) or as they are (`SpanList`). */
export interface Batch {
  readonly count: number;
  add(span: ReadableSpan): void;
  /** The collector accepted the batch: what it holds may be reused. */
  release?(): void;
}

/** An exporter of `T`, as OpenTelemetry's exporters are. */
export interface Exporter<T> {
  export(items: T, done: (result: ExportResult) => void): void;
  shutdown(): Promise<void>;
  forceFlush?(): Promise<void>;
}

/** The spans themselves, for OpenTelemetry's JSON serializer. */
export class SpanList implements Batch {
  readonly spans: ReadableSpan[] = [];

  get count(): number {
    return this.spans.length;
  }

  add(span: ReadableSpan): void {
    this.spans.push(span);
  }
}

const exporterOptions = (config: TracingConfig) => ({
  url: config.url,
  headers: config.headers,
  timeoutMillis: config.exportTimeoutMs,
});

/** OpenTelemetry's OTLP/HTTP JSON exporter, over span lists. */
export function jsonExporter(config: TracingConfig): Exporter<SpanList> {
  const json = new JsonExporter(exporterOptions(config));
  return {
    export: (list, done) => json.export(list.spans, done),
    shutdown: () => json.shutdown(),
    forceFlush: () => json.forceFlush(),
  };
}

/** OpenTelemetry's OTLP/HTTP protobuf transport, sending encoded batches. */
export function protobufExporter(config: TracingConfig): Exporter<SpanBatch> {
  const options = convertLegacyHttpOptions(exporterOptions(config), 'TRACES', 'v1/traces', {
    'Content-Type': 'application/x-protobuf',
  });
  const serializer = {
    serializeRequest: (batch: SpanBatch) => batch.request(),
    deserializeResponse: (data: Uint8Array) => ProtobufTraceSerializer.deserializeResponse(data),
  };
  const items = { name: 'span' as const, countItems: (batch: SpanBatch) => batch.count };
  return new OTLPExporterBase<SpanBatch>(
    createOtlpHttpExportDelegate(options, serializer, 'otlp_http_span_exporter', items, undefined),
  );
}

type Limits = Pick<
  TracingConfig,
  'maxQueueSize' | 'maxExportBatchSize' | 'scheduleDelayMs' | 'exportTimeoutMs'
>;

export class BatchProcessor<B extends Batch> implements SpanProcessor {
  #open: B;
  readonly #sealed: B[] = [];
  /** Spans ended and not yet handed to the exporter. */
  #queued = 0;
  #exporting = false;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Who waits for the queue to empty (forceFlush, shutdown). */
  #idle: (() => void)[] = [];

  constructor(
    private readonly exporter: Exporter<B>,
    private readonly newBatch: () => B,
    private readonly limits: Limits,
    private readonly dropped: { inc(count?: number): void },
  ) {
    this.#open = newBatch();
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.#stopped || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.#queued >= this.limits.maxQueueSize) {
      this.dropped.inc();
      return;
    }
    this.#open.add(span);
    this.#queued += 1;
    if (this.#open.count >= this.limits.maxExportBatchSize) {
      this.#seal();
      this.#next();
    } else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#seal();
        this.#next();
      }, this.limits.scheduleDelayMs);
      this.#timer.unref();
    }
  }

  /** Export everything ended so far; resolves when the exporter has answered for all of it. */
  forceFlush(): Promise<void> {
    this.#seal();
    if (!this.#exporting && this.#sealed.length === 0) return Promise.resolve();
    const flushed = new Promise<void>((resolve) => this.#idle.push(resolve));
    this.#next();
    return flushed;
  }

  async shutdown(): Promise<void> {
    if (this.#stopped) return;
    await this.forceFlush();
    this.#stopped = true;
    await this.exporter.shutdown();
  }

  #seal(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#open.count === 0) return;
    this.#sealed.push(this.#open);
    this.#open = this.newBatch();
  }

  #next(): void {
    if (this.#exporting) return;
    const batch = this.#sealed.shift();
    if (batch === undefined) {
      for (const resolve of this.#idle.splice(0)) resolve();
      return;
    }
    this.#exporting = true;
    this.#queued -= batch.count;
    let answered = false;
    const done = (): void => {
      if (answered) return;
      answered = true;
      clearTimeout(late);
      this.#exporting = false;
      this.#next();
    };
    // The transport has its own timeout; this one holds even if it never calls back.
    const late = setTimeout(done, this.limits.exportTimeoutMs);
    late.unref();
    this.exporter.export(batch, (result) => {
      // Only an accepted export frees the batch for reuse. Past `late` the transport may still be
      // sending or retrying it, and a collector that refuses a request may answer before it has
      // read the body, which the socket is then still writing: a failed batch is left to the
      // garbage collector instead.
      if (result.code === ExportResultCode.SUCCESS) batch.release?.();
      done();
    });
  }
}
