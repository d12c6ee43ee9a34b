/**
 * Trace and span ids (W3C Trace Context: 16 and 8 random bytes, not all zero, as lower-case hex)
 * cut from a pool of random bytes that the operating system's generator fills 4 KiB at a time:
 * one call into crypto per 256 span ids, where the SDK's `RandomIdGenerator` calls `Math.random`
 * and writes into a buffer for every 4 bytes. Same interface, so the samplers see the same ids.
 */
import { randomFillSync } from 'node:crypto';
import type { IdGenerator } from '@opentelemetry/sdk-trace';

const POOL_BYTES = 4096;
const TRACE_ID_BYTES = 16;
const SPAN_ID_BYTES = 8;

export class PooledIds implements IdGenerator {
  readonly #pool = Buffer.alloc(POOL_BYTES);
  #at = POOL_BYTES;

  /** `fill`: what refills the pool (tests give one of their own). */
  constructor(private readonly fill: (pool: Buffer) => void = (pool) => randomFillSync(pool)) {}

  generateTraceId(): string {
    return this.#take(TRACE_ID_BYTES);
  }

  generateSpanId(): string {
    return this.#take(SPAN_ID_BYTES);
  }

  #take(bytes: number): string {
    if (this.#at + bytes > POOL_BYTES) {
      this.fill(this.#pool);
      this.#at = 0;
    }
    const pool = this.#pool;
    const start = this.#at;
    const end = start + bytes;
    this.#at = end;
    // An id of zeros is invalid (W3C Trace Context §3.2.2.3, §3.2.2.4): as the SDK, end it in 1.
    let i = start;
    while (i < end && pool[i] === 0) i += 1;
    if (i === end) pool[end - 1] = 1;
    return pool.toString('hex', start, end);
  }
}
