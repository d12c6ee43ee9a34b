/**
 * OTLP protobuf (opentelemetry-proto trace/v1/trace.proto, common/v1/common.proto) written as each
 * span ends, into a buffer outside the JavaScript heap: a queued span costs its bytes, not a span
 * object that outlives the young generation (docs/benchmarks.md "Tracing"). The bytes are the
 * ones OpenTelemetry's ProtobufTraceSerializer writes for the same spans (otlp-protobuf.test.ts).
 */
import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import {
  BYTES,
  FIRST_CAPACITY,
  FIXED32,
  FIXED64,
  VARINT,
  Writer,
  varintSize,
} from './protobuf-writer.js';
import { RecordedSpan } from './recorded-span.js';

type Envelope = Pick<ReadableSpan, 'resource' | 'instrumentationScope'>;

/** Span.flags: the context's parent-is-remote bits (trace.proto SpanFlags). */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

/**
 * Bytes kept free before a batch's first span: the request's envelope (resource, scope and two
 * lengths) is written there when the batch is sent, so the request is the batch's own buffer,
 * not a copy. A larger envelope (a long OTEL_RESOURCE_ATTRIBUTES) is copied instead.
 */
const HEAD_ROOM = 2048;
const MS_TO_NS = 1e6;
const NS_PER_S = 1e9;

/**
 * A recorded span's start and end: the bytes of its `startTime` and `endTime` (the SDK's
 * `millisToHrTime` and `addHrTimes`, step for step), without their arrays.
 */
function recordedTimes(w: Writer, startMs: number, elapsedMs: number): void {
  const startS = Math.trunc(startMs / 1e3);
  const startNs = Math.round((startMs % 1e3) * MS_TO_NS);
  w.tag(7, FIXED64);
  w.timeOf(startS, startNs);
  let endS = startS + Math.trunc(elapsedMs / 1e3);
  let endNs = startNs + Math.round((elapsedMs % 1e3) * MS_TO_NS);
  if (endNs >= NS_PER_S) {
    endNs -= NS_PER_S;
    endS += 1;
  }
  w.tag(8, FIXED64);
  w.timeOf(endS, endNs);
}

/**
 * Buffers kept for the next batches: one fills while one is sent, whatever the queue's size; a
 * few more absorb a burst. Never shrunk, so never more than this (each at most 1 MiB).
 */
export const MAX_POOLED_BUFFERS = 4;
/** A batch buffer grown past this is not kept for the next batch. */
const MAX_KEPT_CAPACITY = 1024 * 1024;

function anyValue(w: Writer, value: AttributeValue): void {
  if (typeof value === 'string') {
    w.tag(1, BYTES);
    w.string(value);
  } else if (typeof value === 'boolean') {
    w.tag(2, VARINT);
    w.varint(value ? 1 : 0);
  } else if (typeof value === 'number') {
    if (Number.isInteger(value) && value >= -(2 ** 63) && value < 2 ** 63) {
      w.tag(3, VARINT);
      w.varint(value);
    } else {
      w.tag(4, FIXED64);
      w.double(value);
    }
  } else if (Array.isArray(value)) {
    const items = value as readonly (string | number | boolean | null | undefined)[];
    w.tag(5, BYTES);
    const array = w.open();
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      w.tag(1, BYTES);
      const at = w.open();
      if (item !== null && item !== undefined) anyValue(w, item);
      w.close(at);
    }
    w.close(array);
  }
}

function attributes(w: Writer, attrs: Attributes, field: number): void {
  for (const key in attrs) {
    const value = attrs[key];
    w.tag(field, BYTES);
    const kv = w.open();
    w.tag(1, BYTES);
    w.string(key);
    w.tag(2, BYTES);
    const any = w.open();
    if (value !== undefined) anyValue(w, value);
    w.close(any);
    w.close(kv);
  }
}

/** Span.flags and Link.flags: the trace flags, and whether the parent (or linked) context is remote. */
function flags(traceFlags: number, remote: boolean | undefined): number {
  return (traceFlags & 0xff) | HAS_IS_REMOTE | (remote ? IS_REMOTE : 0);
}

function event(w: Writer, e: ReadableSpan['events'][number]): void {
  w.tag(11, BYTES);
  const at = w.open();
  w.tag(1, FIXED64);
  w.time(e.time);
  w.tag(2, BYTES);
  w.string(e.name);
  if (e.attributes) attributes(w, e.attributes, 3);
  w.tag(4, VARINT);
  w.varint(e.droppedAttributesCount ?? 0);
  w.close(at);
}

function link(w: Writer, l: ReadableSpan['links'][number]): void {
  w.tag(13, BYTES);
  const at = w.open();
  w.tag(1, BYTES);
  w.id(l.context.traceId);
  w.tag(2, BYTES);
  w.id(l.context.spanId);
  const traceState = l.context.traceState?.serialize();
  if (traceState) {
    w.tag(3, BYTES);
    w.string(traceState);
  }
  if (l.attributes) attributes(w, l.attributes, 4);
  w.tag(5, VARINT);
  w.varint(l.droppedAttributesCount ?? 0);
  w.tag(6, FIXED32);
  w.fixed32(flags(l.context.traceFlags, l.context.isRemote));
  w.close(at);
}

/**
 * The buffers of batches the collector accepted, for the next batches (at most `keep` of them): a
 * batch buffer is reused, not left for the garbage collector. Allocating a fresh one for every
 * batch made the heap's external memory grow by the batch's size each time, and V8 answers
 * that growth with full collections (docs/benchmarks.md "Tracing").
 */
export class SpanBuffers {
  readonly #free: Writer[] = [];

  constructor(private readonly keep: number) {}

  take(): Writer {
    const w = this.#free.pop();
    if (w === undefined) return new Writer(FIRST_CAPACITY, HEAD_ROOM);
    w.pos = HEAD_ROOM;
    return w;
  }

  give(w: Writer): void {
    if (this.#free.length < this.keep && w.buf.length <= MAX_KEPT_CAPACITY) this.#free.push(w);
  }

  /** Buffers waiting for a batch (tests). */
  get free(): number {
    return this.#free.length;
  }
}

/** The spans of one export, as `ScopeSpans.spans` fields, in the order of the SDK's serializer. */
export class SpanBatch {
  #w: Writer | undefined;
  /** `request()` was called: the head room is written in front of these spans and no others. */
  #sealed = false;
  count = 0;
  /** The first span's resource and scope: one tracer provider, one tracer, so every span's. */
  envelope: Envelope | undefined;

  /** `buffers`: where the buffer comes from and goes back to (by default, a pool that keeps none). */
  constructor(private readonly buffers = new SpanBuffers(0)) {
    this.#w = buffers.take();
  }

  /** The writer, while the batch holds one. */
  #writer(): Writer {
    const w = this.#w;
    if (w === undefined) throw new Error('span batch used after release');
    return w;
  }

  /**
   * The collector accepted this batch: its buffer goes back to the pool. Not before: the request's
   * bytes are that buffer, and a retry sends them again.
   */
  release(): void {
    const w = this.#w;
    if (w === undefined) return;
    this.#w = undefined;
    this.buffers.give(w);
  }

  add(span: ReadableSpan): void {
    if (this.#sealed) throw new Error('span added to a batch already sent');
    const w = this.#writer();
    this.envelope ??= span;
    const context = span.spanContext();
    const parent = span.parentSpanContext;
    w.tag(2, BYTES);
    const at = w.open(2);
    w.tag(1, BYTES);
    w.id(context.traceId);
    w.tag(2, BYTES);
    w.id(context.spanId);
    const traceState = context.traceState?.serialize();
    if (traceState) {
      w.tag(3, BYTES);
      w.string(traceState);
    }
    if (parent?.spanId) {
      w.tag(4, BYTES);
      w.id(parent.spanId);
    }
    w.tag(5, BYTES);
    w.string(span.name);
    w.tag(6, VARINT);
    w.varint(span.kind + 1);
    if (span instanceof RecordedSpan) {
      recordedTimes(w, span.startMs, span.elapsedMs);
    } else {
      w.tag(7, FIXED64);
      w.time(span.startTime);
      w.tag(8, FIXED64);
      w.time(span.endTime);
    }
    attributes(w, span.attributes, 9);
    w.tag(10, VARINT);
    w.varint(span.droppedAttributesCount);
    const events = span.events;
    for (let i = 0; i < events.length; i++) event(w, events[i]!);
    w.tag(12, VARINT);
    w.varint(span.droppedEventsCount);
    const links = span.links;
    for (let i = 0; i < links.length; i++) link(w, links[i]!);
    w.tag(14, VARINT);
    w.varint(span.droppedLinksCount);
    w.tag(15, BYTES);
    const status = w.open();
    if (span.status.message) {
      w.tag(2, BYTES);
      w.string(span.status.message);
    }
    w.tag(3, VARINT);
    w.varint(span.status.code);
    w.close(status);
    w.tag(16, FIXED32);
    w.fixed32(flags(context.traceFlags, parent?.isRemote));
    w.close(at, 2);
    this.count += 1;
  }

  /** The encoded spans (a view: valid until the batch is released). */
  bytes(): Buffer {
    const w = this.#writer();
    return w.buf.subarray(HEAD_ROOM, w.pos);
  }

  /**
   * The ExportTraceServiceRequest: the envelope written into the head room before the spans, so
   * the request is a view of the batch's buffer (valid until the batch is released).
   */
  request(): Uint8Array {
    const envelope = this.envelope;
    if (envelope === undefined) return new Uint8Array(0);
    const w = this.#writer();
    this.#sealed = true;
    const fields = envelopeBytes(envelope);
    const spans = w.pos - HEAD_ROOM;
    const sizes = lengths(fields, spans);
    const head = 1 + varintSize(sizes.resourceSpans) + sizes.resourceSpans - spans;
    if (head > HEAD_ROOM) {
      // Too large to go in front: the request in a buffer of its own.
      const copy = new Writer(head + spans);
      writeHead(copy, fields, sizes);
      copy.raw(this.bytes());
      return copy.buf.subarray(0, copy.pos);
    }
    const end = w.pos;
    const start = HEAD_ROOM - head;
    w.pos = start;
    writeHead(w, fields, sizes);
    w.pos = end;
    return w.buf.subarray(start, end);
  }
}

interface Lengths {
  readonly resourceSpans: number;
  readonly scopeSpans: number;
}

/** The lengths of `ResourceSpans` and of its `ScopeSpans`, around `spans` bytes of spans. */
function lengths({ resource, scope }: EnvelopeBytes, spans: number): Lengths {
  const scopeSpans = scope.length + spans;
  const resourceSpans = resource.length + 1 + varintSize(scopeSpans) + scopeSpans;
  return { scopeSpans, resourceSpans };
}

/** The request up to its first span: `ResourceSpans` and its resource, `ScopeSpans` and its scope. */
function writeHead(
  w: Writer,
  envelope: EnvelopeBytes,
  { resourceSpans, scopeSpans }: Lengths,
): void {
  w.tag(1, BYTES);
  w.varint(resourceSpans);
  w.raw(envelope.resource);
  w.tag(2, BYTES);
  w.varint(scopeSpans);
  w.raw(envelope.scope);
}

/** The last envelope's fields (`ResourceSpans.resource`, `ScopeSpans.scope`): every batch's. */
let lastEnvelope:
  | {
      resource: Envelope['resource'];
      scope: Envelope['instrumentationScope'];
      bytes: EnvelopeBytes;
    }
  | undefined;

interface EnvelopeBytes {
  readonly resource: Buffer;
  readonly scope: Buffer;
}

/**
 * Cached by identity: the sidecar's resource is built once from plain values and its scope is
 * never changed. A resource still waiting for asynchronous attributes is not cached.
 */
function envelopeBytes(envelope: Envelope): EnvelopeBytes {
  const { resource, instrumentationScope: scope } = envelope;
  if (lastEnvelope?.resource === resource && lastEnvelope.scope === scope)
    return lastEnvelope.bytes;
  const r = new Writer(1024);
  r.tag(1, BYTES);
  const resourceAt = r.open();
  attributes(r, resource.attributes, 1);
  r.tag(2, VARINT);
  r.varint(0);
  r.close(resourceAt);
  const s = new Writer(256);
  s.tag(1, BYTES);
  const scopeAt = s.open();
  s.tag(1, BYTES);
  s.string(scope.name);
  if (scope.version) {
    s.tag(2, BYTES);
    s.string(scope.version);
  }
  s.close(scopeAt);
  const bytes = {
    resource: Buffer.from(r.buf.subarray(0, r.pos)),
    scope: Buffer.from(s.buf.subarray(0, s.pos)),
  };
  if (resource.asyncAttributesPending !== true) lastEnvelope = { resource, scope, bytes };
  return bytes;
}
