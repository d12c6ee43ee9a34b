/**
 * OTLP protobuf (opentelemetry-proto trace/v1/trace.proto, common/v1/common.proto) written as each
 * span ends, into a buffer outside the JavaScript heap: a queued span costs its bytes, not a span
 * object that outlives the young generation (docs/benchmarks.md "Tracing"). The bytes are the
 * ones OpenTelemetry's ProtobufTraceSerializer writes for the same spans (otlp-protobuf.test.ts).
 */
import type { Attributes, AttributeValue, HrTime } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';

type Envelope = Pick<ReadableSpan, 'resource' | 'instrumentationScope'>;

/** Wire types. */
const VARINT = 0;
const FIXED64 = 1;
const BYTES = 2;
const FIXED32 = 5;

/** Span.flags: the context's parent-is-remote bits (trace.proto SpanFlags). */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

const FIRST_CAPACITY = 64 * 1024;

/** A hex digit's value (input checked by the SDK: ids are lower-case hex). */
function nibble(code: number): number {
  return code <= 57 ? code - 48 : (code | 32) - 87;
}

/**
 * A growing protobuf writer over a Buffer. Byte by byte in JavaScript: for the short strings and
 * ids of a span that is several times faster than a call into node's encoders.
 */
class Writer {
  buf: Buffer;
  pos = 0;

  constructor(capacity = FIRST_CAPACITY) {
    this.buf = Buffer.allocUnsafe(capacity);
  }

  reserve(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + bytes) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  varint(value: number): void {
    this.reserve(10);
    if (value < 0) return this.negative(value);
    let v = value;
    while (v > 127) {
      this.buf[this.pos++] = (v & 127) | 128;
      v = Math.floor(v / 128);
    }
    this.buf[this.pos++] = v;
  }

  /** A negative integer: ten bytes of its 64-bit two's complement, as protobuf's int64. */
  negative(value: number): void {
    let v = BigInt.asUintN(64, BigInt(value));
    while (v > 127n) {
      this.buf[this.pos++] = Number(v & 127n) | 128;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
  }

  /** A field's key (tag): one byte for the fields below 16. */
  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  string(text: string): void {
    const length = text.length;
    if (length >= 16384 * 128) return this.#utf8(text, this.pos);
    this.reserve(length + 3);
    const buf = this.buf;
    const start = this.pos;
    let at = start + (length < 128 ? 1 : length < 16384 ? 2 : 3);
    for (let i = 0; i < length; i++) {
      const code = text.charCodeAt(i);
      if (code > 127) return this.#utf8(text, start);
      buf[at++] = code;
    }
    // The length's varint, in the bytes kept before the text (not varint(): its reserve could
    // move the buffer and lose the text just written).
    let v = length;
    let p = start;
    while (v > 127) {
      buf[p++] = (v & 127) | 128;
      v >>>= 7;
    }
    buf[p] = v;
    this.pos = at;
  }

  #utf8(text: string, start: number): void {
    this.pos = start;
    const length = Buffer.byteLength(text);
    this.varint(length);
    this.reserve(length);
    this.pos += this.buf.write(text, this.pos, length, 'utf8');
  }

  /** A trace or span id: its hex text as bytes. */
  id(hex: string): void {
    const length = hex.length >>> 1;
    this.reserve(length + 1);
    const buf = this.buf;
    buf[this.pos++] = length;
    for (let i = 0; i < length; i++) {
      buf[this.pos++] = (nibble(hex.charCodeAt(2 * i)) << 4) | nibble(hex.charCodeAt(2 * i + 1));
    }
  }

  fixed32(value: number): void {
    this.reserve(4);
    const buf = this.buf;
    buf[this.pos++] = value & 0xff;
    buf[this.pos++] = (value >>> 8) & 0xff;
    buf[this.pos++] = (value >>> 16) & 0xff;
    buf[this.pos++] = (value >>> 24) & 0xff;
  }

  double(value: number): void {
    this.reserve(8);
    this.pos = this.buf.writeDoubleLE(value, this.pos);
  }

  /** Nanoseconds since the epoch of an HrTime, as fixed64 (exact: 16-bit limbs of the seconds). */
  time(t: HrTime): void {
    const low16 = (t[0] & 0xffff) * 1e9;
    const high = Math.floor(t[0] / 0x10000) * 1e9;
    const low = (high % 0x10000) * 0x10000 + low16 + t[1];
    this.fixed32(low % 0x1_0000_0000);
    this.fixed32((Math.floor(high / 0x10000) + Math.floor(low / 0x1_0000_0000)) >>> 0);
  }

  /**
   * Start a length-delimited field, keeping `guess` bytes for its length (1: below 128 bytes,
   * 2: below 16 KiB); the content moves if the guess was wrong.
   */
  open(guess: 1 | 2 = 1): number {
    this.reserve(guess);
    const at = this.pos;
    this.pos += guess;
    return at;
  }

  close(at: number, guess: 1 | 2 = 1): void {
    const length = this.pos - at - guess;
    let size = 1;
    while (length >= 2 ** (7 * size)) size += 1;
    if (size !== guess) {
      this.reserve(size - guess);
      this.buf.copyWithin(at + size, at + guess, this.pos);
      this.pos += size - guess;
    }
    let v = length;
    for (let i = 0; i < size - 1; i++) {
      this.buf[at + i] = (v & 127) | 128;
      v = Math.floor(v / 128);
    }
    this.buf[at + size - 1] = v;
  }
}

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
    w.tag(5, BYTES);
    const array = w.open();
    for (const item of value) {
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

/** The spans of one export, as `ScopeSpans.spans` fields, in the order of the SDK's serializer. */
export class SpanBatch {
  readonly #w = new Writer();
  count = 0;
  /** The first span's resource and scope: one tracer provider, one tracer, so every span's. */
  envelope: Envelope | undefined;

  add(span: ReadableSpan): void {
    const w = this.#w;
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
    w.tag(7, FIXED64);
    w.time(span.startTime);
    w.tag(8, FIXED64);
    w.time(span.endTime);
    attributes(w, span.attributes, 9);
    w.tag(10, VARINT);
    w.varint(span.droppedAttributesCount);
    for (const e of span.events) event(w, e);
    w.tag(12, VARINT);
    w.varint(span.droppedEventsCount);
    for (const l of span.links) link(w, l);
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

  /** The encoded spans (a view: valid until the batch is dropped). */
  bytes(): Buffer {
    return this.#w.buf.subarray(0, this.#w.pos);
  }
}

/** An ExportTraceServiceRequest holding `batch` under its resource and scope. */
export function exportRequest(batch: SpanBatch): Uint8Array {
  const spans = batch.bytes();
  const envelope = batch.envelope;
  if (envelope === undefined) return new Uint8Array(0);
  const { resource, instrumentationScope: scope } = envelope;
  const w = new Writer(spans.length + 1024);
  w.tag(1, BYTES);
  const resourceSpans = w.open();
  w.tag(1, BYTES);
  const resourceAt = w.open();
  attributes(w, resource.attributes, 1);
  w.tag(2, VARINT);
  w.varint(0);
  w.close(resourceAt);
  w.tag(2, BYTES);
  const scopeSpans = w.open();
  w.tag(1, BYTES);
  const scopeAt = w.open();
  w.tag(1, BYTES);
  w.string(scope.name);
  if (scope.version) {
    w.tag(2, BYTES);
    w.string(scope.version);
  }
  w.close(scopeAt);
  w.reserve(spans.length);
  w.pos += spans.copy(w.buf, w.pos);
  w.close(scopeSpans);
  w.close(resourceSpans);
  return w.buf.subarray(0, w.pos);
}
