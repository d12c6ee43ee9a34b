import { describe, expect, it } from 'vitest';
import type { SidecarError } from '../../errors.js';
import { createLogger } from '../../telemetry/logger.js';
import { Cooldown, mayStartCooldown } from './cooldown.js';

const logger = createLogger({ level: 'silent' });

describe('cooldown', () => {
  it('only 429 and 503 are read for one', () => {
    expect([429, 503, 500, 200].map(mayStartCooldown)).toEqual([true, true, false, false]);
  });

  it('extends, never shortens; refuses while in force with whole seconds left', () => {
    const cooldown = new Cooldown();
    expect(cooldown.extend(429, 10_000, 0)).toBe(true);
    expect(cooldown.extend(503, 5_000, 0)).toBe(false);
    expect(cooldown.status).toBe(429);
    const err = (() => {
      try {
        cooldown.check(1_500);
      } catch (e) {
        return e as SidecarError;
      }
      throw new Error('expected a refusal');
    })();
    expect(err.code).toBe('upstream_rate_limited');
    expect(err.retryAfterSeconds).toBe(9);
    cooldown.check(10_000);
    expect(cooldown.until).toBe(0);
    expect(cooldown.view(10_000)).toBeNull();
  });

  it('a 503 refuses as upstream_unavailable; /status shows it', () => {
    const cooldown = new Cooldown();
    cooldown.extend(503, 2_000, 0);
    expect(cooldown.refusal(2_000).code).toBe('upstream_unavailable');
    expect(cooldown.view(0)).toEqual({
      status: 503,
      secondsLeft: 2,
      until: new Date(2_000).toISOString(),
    });
  });

  it('asks for what Retry-After says, capped; nothing for a bad or past one', () => {
    const cooldown = new Cooldown();
    expect(cooldown.askedFor(429, { 'retry-after': '30' }, 0, 10_000, logger)).toBe(10_000);
    expect(cooldown.askedFor(429, { 'retry-after': '3' }, 0, 10_000, logger)).toBe(3_000);
    expect(cooldown.askedFor(429, { 'retry-after': 'soon' }, 0, 10_000, logger)).toBeUndefined();
    expect(cooldown.askedFor(429, {}, 0, 10_000, logger)).toBeUndefined();
  });
});
