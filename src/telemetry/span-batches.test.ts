import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SpanBatch } from './otlp-protobuf.js';
import { BatchProcessor, SpanList, type Batch, type Exporter } from './span-batches.js';

const LIMITS = {
  maxQueueSize: 8,
  maxExportBatchSize: 3,
  scheduleDelayMs: 1_000,
  exportTimeoutMs: 5_000,
};

/** An exporter that answers only when told to. */
function heldExporter<B extends Batch>() {
  const calls: { batch: B; done: (result: ExportResult) => void }[] = [];
  const exporter: Exporter<B> & { shutdowns: number } = {
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

function setup(newBatch: () => Batch = () => new SpanBatch(), limits = LIMITS) {
  const held = heldExporter();
  const dropped = { count: 0, inc: () => (dropped.count += 1) };
  const processor = new BatchProcessor(held.exporter, newBatch, limits, dropped);
  const provider = new TracerProvider({ spanProcessors: [processor] });
  const tracer = provider.getTracer('test');
  const end = (n: number): void => {
    for (let i = 0; i < n; i++) tracer.startSpan(`span ${i}`).end();
  };
  return { ...held, dropped, processor, end };
}

describe('the batch processor', () => {
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

  it.each([
    ['encoded spans (protobuf)', () => new SpanBatch()],
    ['span lists (JSON)', () => new SpanList()],
  ])('holds at most maxQueueSize spans waiting, the rest dropped and counted: %s', (_, batch) => {
    const { calls, dropped, end } = setup(batch);
    // One batch of 3 at the exporter (left the queue), then 8 waiting, then 4 dropped.
    end(15);
    expect(calls.map((c) => c.batch.count)).toEqual([3]);
    expect(dropped.count).toBe(4);
  });

  it('a span list hands the exporter the ended spans themselves, in order', () => {
    const { calls, end } = setup(() => new SpanList());
    end(3);
    const list = calls[0]!.batch as SpanList;
    expect(list.spans.map((s) => s.name)).toEqual(['span 0', 'span 1', 'span 2']);
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

  it('frees a batch when the collector accepts it, not when its own timeout gives up, nor after a refusal', () => {
    const released: number[] = [];
    let made = 0;
    const newBatch = (): Batch => {
      const id = made++;
      const list = new SpanList();
      return Object.assign(list, { release: () => released.push(id) });
    };
    const { calls, answer, end } = setup(newBatch);
    end(3);
    expect(calls).toHaveLength(1);
    expect(released).toEqual([]);
    vi.advanceTimersByTime(LIMITS.exportTimeoutMs);
    // Past the processor's timeout the transport may still be sending (or retrying) the batch.
    end(3);
    expect(calls).toHaveLength(2);
    expect(released).toEqual([]);
    answer(1);
    expect(released).toEqual([1]);
    answer(0);
    expect(released).toEqual([1, 0]);
    // A refused export is not reused: the collector may have answered before reading it all.
    end(3);
    calls[2]!.done({ code: ExportResultCode.FAILED, error: new Error('refused') });
    expect(released).toEqual([1, 0]);
  });

  it('an unsampled span is not queued', () => {
    const held = heldExporter();
    const processor = new BatchProcessor(held.exporter, () => new SpanBatch(), LIMITS, {
      inc: () => {},
    });
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
