import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../clock.js';
import { SidecarError } from '../../errors.js';
import { createLogger } from '../../telemetry/logger.js';
import { CLIENT_GONE } from '../outcome.js';
import type { ExchangeView } from '../stages.js';
import { QuotaGuard } from './guard.js';
import { quotaStage } from './stage.js';

function guard(rateLimit?: { count: number; periodMs: number }): QuotaGuard {
  return new QuotaGuard({
    rateLimit,
    queueMs: 60_000,
    maxCooldownSeconds: 300,
    clock: systemClock,
    metrics: {
      rateLimitWait: { observe: () => undefined },
      quotaRequests: { inc: () => undefined },
    },
    logger: createLogger({ level: 'silent' }),
  });
}

/** The parts of an exchange the stage reads: the request's headers and the client's response. */
function exchange(): ExchangeView & { res: EventEmitter } {
  const res = new EventEmitter();
  return { req: { headers: {} }, res } as unknown as ExchangeView & { res: EventEmitter };
}

describe('the quota stage on the request path', () => {
  it('without a limit it goes on synchronously; a cooldown refuses by throwing', () => {
    const g = guard();
    const stage = quotaStage(g);
    expect(stage.beforeUpstream!(exchange())).toBeUndefined();
    const head = { headers: { 'retry-after': '30' } };
    expect(stage.upstreamAnswered!(exchange(), 503, head)).toBeUndefined();
    expect(() => stage.beforeUpstream!(exchange())).toThrow(SidecarError);
    // No RateLimit fields without a limit.
    expect(head.headers).not.toHaveProperty('ratelimit');
  });

  it('under a limit the answer carries the RateLimit fields', () => {
    const stage = quotaStage(guard({ count: 10, periodMs: 1_000 }));
    expect(stage.beforeUpstream!(exchange())).toBeUndefined();
    const head = { headers: {} as Record<string, string> };
    stage.upstreamAnswered!(exchange(), 200, head);
    expect(head.headers['ratelimit-policy']).toBe('"upstream";q=10;w=1');
    expect(head.headers.ratelimit).toMatch(/^"upstream";r=\d+;t=\d+$/);
  });

  it('a request waiting for a slot whose client leaves gives its place up: CLIENT_GONE', async () => {
    const stage = quotaStage(guard({ count: 1, periodMs: 60_000 }));
    expect(stage.beforeUpstream!(exchange())).toBeUndefined();
    const waiting = exchange();
    const outcome = stage.beforeUpstream!(waiting);
    expect(outcome).toBeInstanceOf(Promise);
    waiting.res.emit('close');
    expect(await outcome).toBe(CLIENT_GONE);
    expect(waiting.res.listenerCount('close')).toBe(0);
  });
});
