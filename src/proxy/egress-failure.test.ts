/**
 * The 502 when the egress proxy kept the API out of reach: it names the proxy, and one log line
 * says so per interval however many requests fail, with the count of those not logged. The
 * interval runs on a hand-driven clock.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { EgressProxyError } from '../errors.js';
import { EGRESS_LOG_EVERY_MS, EgressFailures, egressFailureOf } from './egress-failure.js';

const refused = new EgressProxyError('http://proxy:3128', 'api:443', { status: 403 });

describe('egressFailureOf', () => {
  it('finds the egress error itself or as a cause a few levels down, else nothing', () => {
    expect(egressFailureOf(refused)).toBe(refused);
    const wrapped = new Error('a', { cause: new Error('b', { cause: refused }) });
    expect(egressFailureOf(wrapped)).toBe(refused);
    expect(egressFailureOf(new Error('ECONNREFUSED'))).toBeUndefined();
    expect(egressFailureOf('not an error')).toBeUndefined();
  });
});

describe('EgressFailures.unreachable', () => {
  it('names the proxy; logs once per interval with how many failed meanwhile', () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    let now = 1_000_000;
    const failures = new EgressFailures(pino(sink), { now: () => now });
    const err = new Error('connect failed', { cause: refused });
    expect(failures.unreachable(err)).toMatchObject({
      code: 'upstream_unreachable',
      message: refused.message,
    });
    failures.unreachable(err);
    failures.unreachable(err);
    expect(lines).toHaveLength(1);
    now += EGRESS_LOG_EVERY_MS - 1;
    failures.unreachable(err);
    expect(lines).toHaveLength(1);
    now += 1;
    failures.unreachable(err);
    expect(lines.map((l) => l.suppressed)).toEqual([0, 3]);
    expect(lines[0]).toMatchObject({ event: 'egress_proxy', proxyStatus: 403 });
  });

  it('a failure of the API itself is a plain 502 and no egress line', () => {
    const lines: unknown[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk);
        done();
      },
    });
    const failures = new EgressFailures(pino(sink), { now: () => 0 });
    expect(failures.unreachable(new Error('ECONNREFUSED'))).toMatchObject({
      code: 'upstream_unreachable',
      message: 'the upstream could not be reached',
    });
    expect(lines).toHaveLength(0);
  });
});
