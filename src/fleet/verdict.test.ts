import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import type { Logger } from '../telemetry/logger.js';
import {
  STORE_CONNECT_TIMEOUT_MS,
  StoreVerdict,
  describe as describeError,
  explainCause,
  isRefusal,
  startWaitMs,
} from './verdict.js';

/** A logger that records each line's fields and level. */
function recordingLogger() {
  const lines: { level: string; fields: Record<string, unknown> }[] = [];
  const base = pino({ level: 'silent' });
  const logger = Object.assign(Object.create(base) as Logger, {
    warn: (fields: Record<string, unknown>) => lines.push({ level: 'warn', fields }),
    info: (fields: Record<string, unknown>) => lines.push({ level: 'info', fields }),
  });
  return { logger, lines };
}

function verdict(mode: 'standalone' | 'cluster' | 'sentinel' = 'standalone') {
  const { logger, lines } = recordingLogger();
  const v = new StoreVerdict({ clock: systemClock, logger, url: 'redis://store:6379', mode });
  return { v, lines };
}

describe('startWaitMs', () => {
  it('waits one connect timeout for a standalone store, three for a cluster or sentinel', () => {
    expect(startWaitMs('standalone')).toBe(STORE_CONNECT_TIMEOUT_MS);
    expect(startWaitMs('cluster')).toBe(3 * STORE_CONNECT_TIMEOUT_MS);
    expect(startWaitMs('sentinel')).toBe(3 * STORE_CONNECT_TIMEOUT_MS);
  });
});

describe('StoreVerdict', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    vi.setSystemTime(new Date('2026-01-01T00:00:00Z'));
  });
  afterEach(() => vi.useRealTimers());

  it('starts connecting with no error', () => {
    const { v } = verdict();
    expect(v.state).toBe('connecting');
    expect(v.lastError).toBeNull();
  });

  it('logs a store down at start once, with since: start, and not again per failure', () => {
    const { v, lines } = verdict();
    v.down(new Error('connect ECONNREFUSED'));
    v.down(new Error('connect ECONNREFUSED again'));
    expect(v.state).toBe('down');
    expect(lines).toEqual([
      {
        level: 'warn',
        fields: expect.objectContaining({
          event: 'store',
          up: false,
          since: 'start',
          error: 'connect ECONNREFUSED',
        }) as unknown,
      },
    ]);
    // The last error is still noted, with the clock's time.
    expect(v.lastError).toEqual({
      message: 'connect ECONNREFUSED again',
      at: '2026-01-01T00:00:00.000Z',
    });
  });

  it('logs up once, and a later outage without since: start', () => {
    const { v, lines } = verdict();
    v.up();
    v.up();
    v.down(new Error('lost'));
    expect(lines.map((l) => [l.level, l.fields.up, l.fields.since])).toEqual([
      ['info', true, undefined],
      ['warn', false, undefined],
    ]);
  });

  it('notes an error without changing the verdict, and hands out a copy', () => {
    const { v, lines } = verdict();
    v.note(new AggregateError([new Error('first of many')]));
    expect(v.state).toBe('connecting');
    const error = v.lastError!;
    expect(error.message).toBe('first of many');
    error.message = 'changed';
    expect(v.lastError?.message).toBe('first of many');
    expect(lines).toEqual([]);
  });

  it('says when a sentinel address names a data node', () => {
    const { v } = verdict('sentinel');
    expect(v.cause(new Error("ERR unknown command 'sentinel'"))).toMatch(
      /names a data node, not a sentinel/,
    );
    expect(verdict('standalone').v.cause(new Error("ERR unknown command 'sentinel'"))).toBe(
      "ERR unknown command 'sentinel'",
    );
  });

  it('ends the start wait when its timer fires, only while still connecting', () => {
    const { v } = verdict();
    const over = vi.fn();
    v.endStartWaitIn(2_000, over);
    vi.advanceTimersByTime(1_999);
    expect(over).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(over).toHaveBeenCalledTimes(1);

    const { v: upped } = verdict();
    const never = vi.fn();
    upped.endStartWaitIn(2_000, never);
    upped.up();
    vi.advanceTimersByTime(10_000);
    expect(never).not.toHaveBeenCalled();
  });

  it('keeps the earlier deadline: a later one does not postpone it, a sooner one replaces it', () => {
    const { v } = verdict();
    const first = vi.fn();
    const later = vi.fn();
    const sooner = vi.fn();
    v.endStartWaitIn(2_000, first);
    v.endStartWaitIn(5_000, later);
    v.endStartWaitIn(500, sooner);
    vi.advanceTimersByTime(10_000);
    expect(later).not.toHaveBeenCalled();
    expect(first).not.toHaveBeenCalled();
    expect(sooner).toHaveBeenCalledTimes(1);
  });

  it('sets no start wait once settled, and close cancels a pending one', () => {
    const { v } = verdict();
    v.down(new Error('x'));
    const after = vi.fn();
    v.endStartWaitIn(100, after);
    const { v: closing } = verdict();
    const cancelled = vi.fn();
    closing.endStartWaitIn(100, cancelled);
    closing.close();
    vi.advanceTimersByTime(1_000);
    expect(after).not.toHaveBeenCalled();
    expect(cancelled).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('what a store error says', () => {
  it('its one-line cause: the message, else the name; the first of an AggregateError', () => {
    expect(describeError(new Error('ECONNREFUSED 127.0.0.1:6379'))).toBe(
      'ECONNREFUSED 127.0.0.1:6379',
    );
    const unnamed = new Error('');
    unnamed.name = 'ConnectionTimeoutError';
    expect(describeError(unnamed)).toBe('ConnectionTimeoutError');
    const both = new AggregateError([
      new Error('ECONNREFUSED ::1'),
      new Error('ECONNREFUSED 127.0.0.1'),
    ]);
    expect(describeError(both)).toBe('ECONNREFUSED ::1');
    expect(describeError('plain')).toBe('plain');
  });

  it('a refusal is an error reply the next attempt gets too; a lost connection or TRYAGAIN is not', () => {
    for (const reply of [
      'WRONGPASS invalid username-password pair',
      'NOAUTH Authentication required.',
      "NOPERM User x has no permissions to run the 'evalsha' command",
      'CLUSTERDOWN The cluster is down',
      "ERR unknown command 'SENTINEL'",
    ]) {
      expect(isRefusal(new Error(reply))).toBe(true);
    }
    expect(isRefusal(new Error('ECONNREFUSED 127.0.0.1:6379'))).toBe(false);
    expect(isRefusal(new Error('TRYAGAIN Multiple keys request during rehashing of slot'))).toBe(
      false,
    );
    expect(isRefusal(new Error('ERRATIC'))).toBe(false);
  });

  it('a data node named where sentinels are expected says so; other causes are as they are', () => {
    const unknown =
      "ERR unknown command 'sentinel', with args beginning with: 'get-master-addr-by-name'";
    expect(explainCause('sentinel', unknown)).toBe(
      `${unknown} (STORE_URL names a data node, not a sentinel)`,
    );
    expect(explainCause('standalone', unknown)).toBe(unknown);
    expect(explainCause('sentinel', 'ECONNREFUSED')).toBe('ECONNREFUSED');
  });

  it('the verdict shows the explained cause', () => {
    const { v } = verdict('sentinel');
    expect(v.cause(new Error("ERR unknown command 'SENTINEL'"))).toMatch(/names a data node/);
  });
});
