import { isValidSpanId, isValidTraceId } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { PooledIds } from './span-ids.js';

describe('pooled span ids', () => {
  it('are valid W3C ids, lower-case hex, and do not repeat', () => {
    const ids = new PooledIds();
    const seen = new Set<string>();
    // Several refills of the 4 KiB pool, trace and span ids interleaved.
    for (let i = 0; i < 2_000; i++) {
      const trace = ids.generateTraceId();
      const span = ids.generateSpanId();
      expect(trace).toMatch(/^[0-9a-f]{32}$/);
      expect(span).toMatch(/^[0-9a-f]{16}$/);
      expect(isValidTraceId(trace) && isValidSpanId(span)).toBe(true);
      seen.add(trace).add(span);
    }
    expect(seen.size).toBe(4_000);
  });

  it('refill the pool when an id would run past it, never reading stale bytes', () => {
    let fills = 0;
    const ids = new PooledIds((pool) => {
      fills += 1;
      pool.fill(fills);
    });
    // 4096 bytes: 170 trace ids (2720 bytes) and 172 span ids (1376 bytes) fill it exactly.
    for (let i = 0; i < 170; i++) expect(ids.generateTraceId()).toBe('01'.repeat(16));
    for (let i = 0; i < 172; i++) expect(ids.generateSpanId()).toBe('01'.repeat(8));
    expect(fills).toBe(1);
    expect(ids.generateSpanId()).toBe('02'.repeat(8));
    expect(fills).toBe(2);
  });

  it('an id of zeros ends in 1 instead, as the SDK does', () => {
    const ids = new PooledIds((pool) => pool.fill(0));
    expect(ids.generateTraceId()).toBe(`${'0'.repeat(31)}1`);
    expect(ids.generateSpanId()).toBe(`${'0'.repeat(15)}1`);
  });
});
