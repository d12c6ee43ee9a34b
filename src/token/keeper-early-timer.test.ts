/**
 * Regression: a timer that fires a millisecond before the wall clock reaches its due time (libuv
 * measures delays from its cached loop time, so this happens under load) found the retry "not yet
 * allowed", saw the same due time already recorded, and armed nothing: the keeper went silent
 * until a proxied request came (seen in the fleet e2e test as a 10 s gap after a lease was lost).
 */
import { createMetricsRegistry } from '../telemetry/exposition.js';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import type { Clock } from '../clock.js';
import { TokenEndpointError } from '../errors.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { TokenKeeper } from './keeper.js';
import type { GrantRequest, TokenEndpoint, TokenSet } from './types.js';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2030-01-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Every timer fires 1 ms before `now()` says it is due. */
const earlyClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, Math.max(0, ms - 1)),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

it('a retry timer that fires 1 ms early still leads to the retry', async () => {
  const requests: GrantRequest[] = [];
  const endpoint: TokenEndpoint = {
    requestToken(request): Promise<TokenSet> {
      requests.push(request);
      if (requests.length === 1) {
        return Promise.reject(new TokenEndpointError('server', 'token endpoint answered 503'));
      }
      return Promise.resolve({
        accessToken: 'access-2',
        tokenType: 'bearer',
        expiresInSeconds: 600,
        lifetimeDefaulted: false,
        refreshToken: undefined,
      });
    },
  };
  const keeper = new TokenKeeper({
    endpoint,
    readCredentials: () => Promise.resolve({ clientId: 'id', clientSecret: 'secret' }),
    settings: { waitMs: 1000, refreshMarginSeconds: 60, refreshFraction: 0.2 },
    clock: earlyClock,
    random: () => 0.5,
    logger: createLogger({ level: 'silent' }),
    metrics: createMetrics({
      registry: createMetricsRegistry(),
      defaultMetrics: false,
    }),
  });
  keeper.start();
  await vi.advanceTimersByTimeAsync(0);
  expect(requests).toHaveLength(1);
  // First backoff step: at most 1 s (here 0.5 s). Give it 2 s of timers.
  await vi.advanceTimersByTimeAsync(2_000);
  expect(requests).toHaveLength(2);
  expect(keeper.status().ready).toBe(true);
  keeper.stop();
});
