/**
 * A protobuf writer over a growing Buffer: the wire primitives the OTLP span encoder
 * (otlp-protobuf.ts) is written with.
 */
import type { HrTime } from '@opentelemetry/api';

/** Wire types. */
export const VARINT = 0;
export const FIXED64 = 1;
export const BYTES = 2;
export const FIXED32 = 5;

/** A new writer's buffer. */
export const FIRST_CAPACITY = 64 * 1024;

/** Bytes of `value` as a varint. */
export function varintSize(value: number): number {
  let size = 1;
  while (value >= 2 ** (7 * size)) size += 1;
  return size;
}

/** A hex digit's value (input checked by the SDK: ids are lower-case hex). */
function nibble(code: number): number {
  return code <= 57 ? code - 48 : (code | 32) - 87;
}

/**
 * A growing protobuf writer over a Buffer. Byte by byte in JavaScript: for the short strings and
 * ids of a span that is faster than a call into node's encoders (docs/benchmarks.md "Tracing").
 */
export class Writer {
  buf: Buffer;
  pos: number;

  constructor(capacity = FIRST_CAPACITY, start = 0) {
    this.buf = Buffer.allocUnsafe(capacity);
    this.pos = start;
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

  /** Bytes already encoded, as they are. */
  raw(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  /** A trace or span id: its hex text as bytes. */
  id(hex: string): void {
    const length = hex.length >>> 1;
    this.reserve(length + 1);
    const buf = this.buf;
    let pos = this.pos;
    buf[pos++] = length;
    for (let j = 0; j < 2 * length; j += 2) {
      buf[pos++] = (nibble(hex.charCodeAt(j)) << 4) | nibble(hex.charCodeAt(j + 1));
    }
    this.pos = pos;
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
    this.timeOf(t[0], t[1]);
  }

  /** `time([seconds, nanos])`, without the array. */
  timeOf(seconds: number, nanos: number): void {
    const low16 = (seconds & 0xffff) * 1e9;
    const high = Math.floor(seconds / 0x10000) * 1e9;
    const low = (high % 0x10000) * 0x10000 + low16 + nanos;
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
    const size = varintSize(length);
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
