import type { ExportResult } from '@opentelemetry/core';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { SpanBatch } from './otlp-protobuf.js';
import { EncodingProcessor, type BatchExporter } from './span-batches.js';

const LIMITS = {
  maxQueueSize: 8,
  maxExportBatchSize: 3,
  scheduleDelayMs: 1_000,
  exportTimeoutMs: 5_000,
};

/** An exporter that answers only when told to. */
function heldExporter() {
  const calls: { batch: SpanBatch; done: (result: ExportResult) => void }[] = [];
  const exporter: BatchExporter & { shutdowns: number } = {
    shutdowns: 0,
    export: (batch, done) => calls.push({ batch, done }),
    forceFlush: async () => {},
    shutdown: () => {
      exporter.shutdowns += 1;
      return Promise.resolve();
    },
  };
  const answer = (i: number): void => calls[i]!.done({ code: 0 });
  return { exporter, calls, answer };
}

function setup(limits = LIMITS) {
  const held = heldExporter();
  const dropped = { count: 0, inc: () => (dropped.count += 1) };
  const processor = new EncodingProcessor(held.exporter, limits, dropped);
  const provider = new TracerProvider({ spanProcessors: [processor] });
  const tracer = provider.getTracer('test');
  const end = (n: number): void => {
    for (let i = 0; i < n; i++) tracer.startSpan(`span ${i}`).end();
  };
  return { ...held, dropped, processor, end };
}

describe('the encoding batch processor', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('exports a full batch at once, and what waited the scheduled delay', () => {
    const { calls, answer, end } = setup();
    end(3);
    expect(calls.map((c) => c.batch.count)).toEqual([3]);
    answer(0);
    end(1);
    expect(calls).toHaveLength(1);
    vi.advanceTimersByTime(999);
    expect(calls).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(calls.map((c) => c.batch.count)).toEqual([3, 1]);
  });

  it('sends one batch at a time; the next leaves when the exporter answers', () => {
    const { calls, answer, end } = setup();
    end(6);
    expect(calls).toHaveLength(1);
    answer(0);
    expect(calls.map((c) => c.batch.count)).toEqual([3, 3]);
  });

  it('holds at most maxQueueSize spans waiting; the rest are dropped and counted', () => {
    const { calls, dropped, end } = setup();
    // One batch of 3 at the exporter (left the queue), then 8 waiting, then 4 dropped.
    end(15);
    expect(calls).toHaveLength(1);
    expect(dropped.count).toBe(4);
  });

  it('an exporter that never answers frees the slot after exportTimeoutMs', () => {
    const { calls, end } = setup();
    end(6);
    expect(calls).toHaveLength(1);
    vi.advanceTimersByTime(LIMITS.exportTimeoutMs);
    expect(calls).toHaveLength(2);
    // A late answer to the first is ignored: it frees nothing twice.
    calls[0]!.done({ code: 0 });
    expect(calls).toHaveLength(2);
  });

  it('forceFlush exports what is open and resolves when every batch is answered', async () => {
    const { calls, answer, end, processor } = setup();
    end(4);
    let flushed = false;
    const flush = processor.forceFlush().then(() => (flushed = true));
    expect(calls.map((c) => c.batch.count)).toEqual([3]);
    answer(0);
    expect(calls.map((c) => c.batch.count)).toEqual([3, 1]);
    await Promise.resolve();
    expect(flushed).toBe(false);
    answer(1);
    await flush;
    expect(flushed).toBe(true);
  });

  it('shutdown flushes, shuts the exporter once, and takes no more spans', async () => {
    const { calls, answer, end, processor, exporter } = setup();
    end(1);
    const stopped = processor.shutdown();
    answer(0);
    await stopped;
    await processor.shutdown();
    expect(exporter.shutdowns).toBe(1);
    end(5);
    expect(calls).toHaveLength(1);
  });

  it('an unsampled span is not queued', () => {
    const held = heldExporter();
    const processor = new EncodingProcessor(held.exporter, LIMITS, { inc: () => {} });
    const provider = new TracerProvider({
      spanProcessors: [processor],
      sampler: {
        shouldSample: () => ({ decision: 1 }),
        toString: () => 'record-only',
      },
    });
    for (let i = 0; i < 10; i++) provider.getTracer('t').startSpan('s').end();
    vi.advanceTimersByTime(LIMITS.scheduleDelayMs);
    expect(held.calls).toHaveLength(0);
  });
});
