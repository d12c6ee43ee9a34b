/**
 * The fleet store's parts (docs/token-store.md): the token coordinator on one connection, the
 * quota guard's and the response cache's shared halves. The Redis client is loaded only when
 * `store.url` is set.
 */
import type { Clock } from '../clock.js';
import type { Config, CredentialsReader } from '../config/types.js';
import type { StoreConnection } from '../fleet/connection.js';
import type { SharedCacheEntries } from '../fleet/ports.js';
import type { SharedQuota } from '../proxy/quota/guard.js';
import type { Logger } from '../telemetry/logger.js';
import { createTokenCoordinator, leaseTtlMs, type TokenCoordinator } from '../token/shared.js';
import type { Teardown } from './teardown.js';

export interface FleetStore {
  coordinator: TokenCoordinator;
  connection: StoreConnection;
}

/**
 * The fleet store, when `store.url` is set (docs/token-store.md); the Redis client is loaded only
 * then. It connects in the background: until it answers, the keeper works as without one.
 */
export async function openFleetStore(
  config: Config,
  deps: { readCredentials: CredentialsReader; logger: Logger; clock: Clock; teardown: Teardown },
): Promise<FleetStore | undefined> {
  const { url, keyPrefix } = config.store;
  if (url === undefined) return undefined;
  const { createStoreConnection, createTokenSetStore, STORE_SCRIPTS } =
    await import('../fleet/index.js');
  const { clock } = deps;
  const logger = deps.logger.child({ component: 'store' });
  const connection = createStoreConnection({
    ...config.store,
    url,
    logger,
    clock,
    scripts: STORE_SCRIPTS,
  });
  deps.teardown.push(() => connection.close());
  const coordinator = createTokenCoordinator({
    store: createTokenSetStore({
      connection,
      leaseTtlMs: leaseTtlMs(config.token.timeoutMs),
      keyPrefix,
      tokenUrl: config.token.url,
      scopes: config.token.scopes,
      readIdentity: deps.readCredentials,
      now: () => clock.now(),
    }),
    health: () => connection.health(),
    settings: config.token,
    now: () => clock.now(),
    sleep: (ms) =>
      new Promise<void>((resolve) => {
        clock.setTimeout(resolve, ms);
      }),
    logger,
  });
  return { coordinator, connection };
}

/** The fleet-wide half of the quota guard, on the store's connection (docs/quota-guard.md). */
export async function openSharedQuota(
  config: Config,
  connection: StoreConnection | undefined,
): Promise<SharedQuota | undefined> {
  if (connection === undefined) return undefined;
  const { createStoreQuota } = await import('../fleet/quota.js');
  return createStoreQuota({
    connection,
    keyPrefix: config.store.keyPrefix,
    upstream: config.upstream.baseUrl,
    rateLimit: config.upstream.rateLimit,
    maxCooldownMs: config.upstream.maxCooldownSeconds * 1000,
  });
}

/** The response cache's shared tier, with `cache.shared` and a store (docs/response-cache.md). */
export async function openSharedCache(
  config: Config,
  started: { store?: { connection: StoreConnection }; readCredentials: CredentialsReader },
  clock: Clock,
): Promise<SharedCacheEntries | undefined> {
  const connection = started.store?.connection;
  if (connection === undefined || !config.cache.shared || config.cache.rules.length === 0)
    return undefined;
  const { createStoreCache } = await import('../fleet/cache-entries.js');
  return createStoreCache({
    connection,
    keyPrefix: config.store.keyPrefix,
    tokenUrl: config.token.url,
    readIdentity: started.readCredentials,
    maxEntryBytes: config.cache.maxSharedEntryBytes,
    now: () => clock.now(),
  });
}
