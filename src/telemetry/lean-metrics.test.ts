import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LeanCounter } from './lean-metrics.js';

/** The exposition's lines; the order of series is not part of it. */
const lines = (text: string) => text.split('\n').sort();

describe('LeanCounter', () => {
  it("exposes what prom-client's Counter exposes, through its collect hook, and resets the same way", async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const options = { name: 'x_total', help: 'Count.', labelNames: ['method', 'code'] as const };
    const reference = new Counter({ ...options, registers: [theirs] });
    const lean = new LeanCounter({ ...options, registers: [ours] });
    const ok = lean.child({ method: 'GET', code: '200' });
    for (let i = 0; i < 3; i++) {
      ok.inc();
      reference.inc({ method: 'GET', code: '200' });
    }
    lean.inc({ method: 'POST', code: 'error' }, 2);
    reference.inc({ method: 'POST', code: 'error' }, 2);
    expect(lines(await ours.metrics())).toEqual(lines(await theirs.metrics()));
    ours.resetMetrics();
    reference.reset();
    ok.inc();
    reference.inc({ method: 'GET', code: '200' });
    expect(lines(await ours.metrics())).toEqual(lines(await theirs.metrics()));
  });
});
