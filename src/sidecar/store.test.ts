/** The fleet store's parts, opened from the configuration: none without a URL, real Redis with one. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../clock.js';
import { loadConfig } from '../config/load.js';
import { createLogger } from '../telemetry/logger.js';
import { startRedisServer, type RedisServer } from '../../test/helpers/redis-server.js';
import { waitFor } from '../../test/helpers/wait.js';
import { openFleetStore, openSharedCache, openSharedQuota } from './store.js';
import { Teardown } from './teardown.js';

const ENV = {
  UPSTREAM_BASE_URL: 'https://api.example.com',
  CLIENT_ID: 'id',
  CLIENT_SECRET: 'secret',
};
const readCredentials = () => Promise.resolve({ clientId: 'id', clientSecret: 'secret' });
const logger = createLogger({ level: 'silent' });

/** Connections redis-server has open, the one asking included. */
async function clients(redis: RedisServer): Promise<number> {
  const list = await redis.command('CLIENT', 'LIST');
  return list.split('\n').filter((line) => line.includes('addr=')).length;
}

describe('without store.url', () => {
  it('opens nothing, and the shared halves stay off', async () => {
    const config = await loadConfig({ env: ENV });
    const teardown = new Teardown();
    const deps = { readCredentials, logger, clock: systemClock, teardown };
    expect(await openFleetStore(config, deps)).toBeUndefined();
    expect(await openSharedQuota(config, undefined)).toBeUndefined();
    expect(await openSharedCache(config, { readCredentials }, systemClock)).toBeUndefined();
  });
});

describe('with store.url (a real redis-server)', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.close();
  });

  it('connects, gives the quota and the cache their shared halves, and the teardown closes it', async () => {
    const config = await loadConfig({
      env: {
        ...ENV,
        STORE_URL: redis.url,
        UPSTREAM_RATE_LIMIT: '100/s',
        CACHE_SHARED: 'true',
        CACHE_RULES: '/v1.0/contracts/=60',
      },
    });
    const teardown = new Teardown();
    const store = await openFleetStore(config, {
      readCredentials,
      logger,
      clock: systemClock,
      teardown,
    });
    expect(store).toBeDefined();
    // redis-server answers on its own time: wait for the connection's verdict.
    await waitFor(() => store!.connection.health().up, 15_000, 'the store up');
    expect(store!.connection.health().url).not.toContain('secret');
    expect(await openSharedQuota(config, store!.connection)).toBeDefined();
    const cache = await openSharedCache(config, { store: store!, readCredentials }, systemClock);
    expect(cache).toBeDefined();
    const noRules = await loadConfig({
      env: { ...ENV, STORE_URL: redis.url, CACHE_SHARED: 'true' },
    });
    expect(
      await openSharedCache(noRules, { store: store!, readCredentials }, systemClock),
    ).toBeUndefined();
    expect(await clients(redis)).toBeGreaterThan(1);
    await teardown.run();
    await waitFor(
      async () => (await clients(redis)) === 1,
      15_000,
      'only the asking connection left',
    );
  });
});
