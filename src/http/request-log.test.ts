import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../telemetry/logger.js';
import { createRequestLog, requestLogLine, type RequestLogFields } from './request-log.js';

const fields = (requestId: string): RequestLogFields => ({
  requestId,
  method: 'GET',
  target: '/v1.0/contracts/?secret=1',
  status: 200,
  durationMs: 3,
  upstreamStatus: 200,
  replayed: false,
});

describe('createRequestLog', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function capture(options: { batchBytes?: number; flushMs?: number } = {}) {
    const writes: string[] = [];
    const log = createRequestLog({
      level: 'info',
      sink: { write: (lines: string) => writes.push(lines) },
      now: () => 0,
      ...options,
    });
    if (log === undefined) throw new Error('info is on');
    return { log, writes };
  }

  it('writes nothing above info', () => {
    expect(createRequestLog({ level: 'warn', sink: { write: () => undefined } })).toBeUndefined();
  });

  it('holds lines until the flush delay, then writes them in one write', () => {
    const { log, writes } = capture({ flushMs: 50 });
    log.write(fields('a'));
    log.write(fields('b'));
    vi.advanceTimersByTime(49);
    expect(writes).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(writes).toHaveLength(1);
    const lines = writes[0]!.split('\n').filter(Boolean);
    expect(lines.map((l) => (JSON.parse(l) as { requestId: string }).requestId)).toEqual([
      'a',
      'b',
    ]);
  });

  it('writes at once when the batch reaches its byte bound, and never holds more', () => {
    const one = requestLogLine(fields('x'), 0).length;
    const { log, writes } = capture({ batchBytes: one * 3, flushMs: 10_000 });
    for (let i = 0; i < 7; i++) log.write(fields('x'));
    // 7 lines with a bound of 3 lines: two full batches went out, one line waits.
    expect(writes.map((w) => w.length)).toEqual([one * 3, one * 3]);
    log.flush();
    expect(writes.map((w) => w.length)).toEqual([one * 3, one * 3, one]);
    vi.advanceTimersByTime(10_000);
    expect(writes).toHaveLength(3);
  });

  it('flush() writes what is held at once and cancels the timer', () => {
    const { log, writes } = capture({ flushMs: 50 });
    log.flush();
    expect(writes).toEqual([]);
    log.write(fields('a'));
    log.flush();
    expect(writes).toHaveLength(1);
    vi.advanceTimersByTime(100);
    expect(writes).toHaveLength(1);
  });

  it('logs the path without the query', () => {
    const line = JSON.parse(requestLogLine(fields('q'), 0)) as { path: string };
    expect(line.path).toBe('/v1.0/contracts/');
  });
});

describe('requestLogLine', () => {
  afterEach(() => vi.useRealTimers());

  // The guard of the request line's entry in docs/design.md "Exceptions": byte for byte the line
  // the sidecar's pino logger writes for the same fields, on the pino release installed.
  it('is the line pino writes for the same fields', () => {
    const at = Date.UTC(2026, 10, 23, 17, 59, 59, 998);
    vi.useFakeTimers({ now: at, toFake: ['Date'] });
    let written = '';
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        written += chunk.toString();
        done();
      },
    });
    const proxy = createLogger({ level: 'info', destination }).child({ component: 'proxy' });
    const cut = { ...fields('r'), upstreamStatus: undefined, result: 'client_closed', code: 'x' };
    const refused = { ...cut, result: undefined, caller: 'reports', callerCheck: 'forbidden' };
    for (const f of [fields('p'), cut, refused]) {
      const { requestId, method, status, durationMs, upstreamStatus, replayed, result, code } = f;
      const { caller, callerCheck } = f;
      const path = '/v1.0/contracts/';
      const line = { requestId, method, path, status, durationMs, upstreamStatus, replayed };
      proxy.info({ ...line, result, code, caller, callerCheck }, 'request');
      expect(written).toBe(requestLogLine(f, at));
      written = '';
    }
  });
});
