/** Upstream 401s: one forced renewal per 5 s, the rejected token kept for the next grant, log lines. */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../telemetry/logger.js';
import { Invalidation } from './invalidation.js';
import { FORCED_RENEWAL_INTERVAL_MS } from './schedule.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

function setup(): { invalidation: Invalidation; lines: () => Record<string, unknown>[] } {
  const lines: string[] = [];
  const logger = createLogger({
    level: 'trace',
    destination: { write: (line: string) => void lines.push(line) },
  });
  return {
    invalidation: new Invalidation(logger),
    lines: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('Invalidation', () => {
  it('the first 401 forces a renewal and remembers the token; within 5 s the next is refused', () => {
    const { invalidation, lines } = setup();
    expect(invalidation.force('access-1', T0)).toBe(true);
    expect(invalidation.rejected).toBe('access-1');
    expect(invalidation.force('access-2', T0 + FORCED_RENEWAL_INTERVAL_MS - 1)).toBe(false);
    expect(invalidation.rejected).toBe('access-1');
    expect(lines()).toHaveLength(1);
    expect(lines()[0]).toMatchObject({
      level: 'warn',
      event: 'token',
      reason: 'forced',
      rateLimited: true,
    });
    expect(JSON.stringify(lines())).not.toContain('access-');
  });

  it('5 s after the previous forced renewal another may start', () => {
    const { invalidation } = setup();
    expect(invalidation.force('access-1', T0)).toBe(true);
    expect(invalidation.force('access-2', T0 + FORCED_RENEWAL_INTERVAL_MS)).toBe(true);
    expect(invalidation.rejected).toBe('access-2');
  });

  it('a refused force does not move the interval: it counts from the last one that ran', () => {
    const { invalidation } = setup();
    invalidation.force('access-1', T0);
    invalidation.force('access-1', T0 + 4_000);
    expect(invalidation.force('access-1', T0 + FORCED_RENEWAL_INTERVAL_MS)).toBe(true);
  });

  it('the next grant takes the rejected token once; an adopted set clears it', () => {
    const { invalidation } = setup();
    invalidation.force('access-1', T0);
    expect(invalidation.take()).toBe('access-1');
    expect(invalidation.take()).toBeUndefined();
    invalidation.force('access-2', T0 + FORCED_RENEWAL_INTERVAL_MS);
    invalidation.clear();
    expect(invalidation.rejected).toBeUndefined();
  });

  it('the forced renewal’s line says what happens next', () => {
    const { invalidation, lines } = setup();
    invalidation.logForced(T0, T0, true);
    invalidation.logForced(T0, T0, false);
    invalidation.logForced(T0, T0 + 2_000, false);
    expect(lines().map((l) => l.msg)).toEqual([
      'upstream rejected the access token; a token request is already in flight',
      'upstream rejected the access token; renewing',
      'upstream rejected the access token; dropped it, the next attempt is after the backoff',
    ]);
    expect(lines()[1]).not.toHaveProperty('nextAttemptAt');
    expect(lines()[2]).toMatchObject({ nextAttemptAt: '2030-01-01T00:00:02.000Z' });
  });
});
