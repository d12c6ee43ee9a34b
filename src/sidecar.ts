/**
 * The running sidecar, built from the configuration: token keeper, fleet store, quota guard,
 * response cache, proxy and admin listeners. Everything built is pushed on one teardown stack, which
 * both a failed start and `shutdown()` unwind.
 */
import { createMetricsRegistry, type MetricsRegistry } from './telemetry/exposition.js';
import { readFileSync } from 'node:fs';
import type { SecureContext } from 'node:tls';
import type { Dispatcher } from 'undici';
import { systemClock, type Clock } from './clock.js';
import { createCredentialsReader } from './config/credentials.js';
import type { Config, CredentialsReader } from './config/types.js';
import { createAdminApp } from './http/admin-app.js';
import { startAdminServer } from './http/admin-server.js';
import { createRequestLog, type RequestLog } from './http/request-log.js';
import { startProxy, type RunningProxy } from './http/start-proxy.js';
import { egressSummary } from './config/egress.js';
import { createApiDispatcher, createTokenDispatcher, trustContext } from './proxy/dispatcher.js';
import type { ForwardStage } from './proxy/forwarder.js';
import { Callers } from './proxy/quota/callers.js';
import { QuotaGuard, type SharedQuota } from './proxy/quota/guard.js';
import { quotaStage } from './proxy/quota/stage.js';
import type { AccessTokenSource } from './proxy/types.js';
import type { StoreConnection } from './fleet/connection.js';
import type { SharedCacheEntries } from './fleet/ports.js';
import type { Logger } from './telemetry/logger.js';
import { createMetrics, type SidecarMetrics } from './telemetry/metrics.js';
import { startTracing } from './telemetry/start-tracing.js';
import type { Tracing } from './telemetry/tracing.js';
import { createTokenEndpointClient } from './token/client.js';
import { TokenKeeper } from './token/keeper.js';
import type { TokenKeeperOptions } from './token/keeper-types.js';
import { createTokenCoordinator, leaseTtlMs, type TokenCoordinator } from './token/shared.js';
import type { TokenEndpoint } from './token/types.js';
import { logConfiguration, logListening } from './startup-log.js';
import { VERSION } from './version.js';

/** In-flight requests get this long to finish after SIGTERM (docs/reference.md "Command line"). */
export const DRAIN_TIMEOUT_MS = 10_000;

export interface SidecarDeps {
  logger: Logger;
  /** Where the request lines go (the logger's destination); none: no request lines. */
  logSink?: { write(line: string): unknown; flushSync?(): void };
  clock?: Clock;
  /** PEM trusted in addition to the system CAs; read from `upstream.caFile` when absent. */
  extraCaPem?: string;
}

export interface RunningSidecar {
  proxyAddress: { host: string; port: number };
  adminAddress: { host: string; port: number };
  keeper: TokenKeeper;
  registry: MetricsRegistry;
  /** Writes the request lines still batched (also on an exit without shutdown). */
  flush(): void;
  /** Drain (readiness 503, stop accepting, finish in-flight up to DRAIN_TIMEOUT_MS), then close everything. */
  shutdown(): Promise<void>;
}

/** Undo steps in the reverse order of what they undo; each runs once, failures do not stop the rest. */
export class Teardown {
  private readonly steps: (() => unknown)[] = [];

  push(step: () => unknown): void {
    this.steps.push(step);
  }

  async run(): Promise<void> {
    for (let step = this.steps.pop(); step !== undefined; step = this.steps.pop()) {
      await Promise.allSettled([Promise.resolve().then(step)]);
    }
  }
}

export function readCa(config: Config, extraCaPem?: string): string | undefined {
  if (extraCaPem !== undefined) return extraCaPem;
  return config.upstream.caFile === undefined
    ? undefined
    : readFileSync(config.upstream.caFile, 'utf8');
}

export function tokenEndpointFor(config: Config, dispatcher: Dispatcher): TokenEndpoint {
  const { url, format, clientAuth, scopes, timeoutMs } = config.token;
  return createTokenEndpointClient({ url, format, clientAuth, scopes, timeoutMs, dispatcher });
}

interface FleetStore {
  coordinator: TokenCoordinator;
  connection: StoreConnection;
}

/**
 * The fleet store, when `store.url` is set (docs/token-store.md); the Redis client is loaded only
 * then. It connects in the background: until it answers, the keeper works as without one.
 */
async function openFleetStore(
  config: Config,
  deps: { readCredentials: CredentialsReader; logger: Logger; clock: Clock; teardown: Teardown },
): Promise<FleetStore | undefined> {
  const { url, keyPrefix } = config.store;
  if (url === undefined) return undefined;
  // The store modules that run scripts load first: the connection registers their scripts.
  const [{ createStoreConnection, createTokenSetStore }] = await Promise.all([
    import('./fleet/index.js'),
    import('./fleet/quota.js'),
    config.cache.shared ? import('./fleet/cache-entries.js') : undefined,
  ]);
  const { clock } = deps;
  const logger = deps.logger.child({ component: 'store' });
  const connection = createStoreConnection({ ...config.store, url, logger, clock });
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
async function openSharedQuota(
  config: Config,
  connection: StoreConnection | undefined,
): Promise<SharedQuota | undefined> {
  if (connection === undefined) return undefined;
  const { createStoreQuota } = await import('./fleet/quota.js');
  return createStoreQuota({
    connection,
    keyPrefix: config.store.keyPrefix,
    upstream: config.upstream.baseUrl,
    rateLimit: config.upstream.rateLimit,
    maxCooldownMs: config.upstream.maxCooldownSeconds * 1000,
  });
}

/** The response cache's shared tier, with `cache.shared` and a store (docs/response-cache.md). */
async function openSharedCache(
  config: Config,
  started: StartedKeeper,
  clock: Clock,
): Promise<SharedCacheEntries | undefined> {
  const connection = started.store?.connection;
  if (connection === undefined || !config.cache.shared || config.cache.rules.length === 0)
    return undefined;
  const { createStoreCache } = await import('./fleet/cache-entries.js');
  return createStoreCache({
    connection,
    keyPrefix: config.store.keyPrefix,
    tokenUrl: config.token.url,
    readIdentity: started.readCredentials,
    maxEntryBytes: config.cache.maxSharedEntryBytes,
    now: () => clock.now(),
  });
}

export interface ProxyStackParts {
  tokens: AccessTokenSource;
  metrics: SidecarMetrics;
  logger: Logger;
  requestLog: RequestLog | undefined;
  clock: Clock;
  teardown: Teardown;
  /** PEM (or its context, shared with the token dispatcher) trusted besides the system CAs. */
  ca?: string | SecureContext;
  shared?: SharedQuota;
  /** With `cache.shared`: the cache's tier in the store. */
  sharedCache?: SharedCacheEntries;
  /** A cache built by the caller (tests: on a fake clock); default: from `cache.rules`. */
  cache?: ForwardStage;
  /** HTTP/1.1 keep-alive timeout of the proxy listener; not a configuration key (tests shorten it). */
  keepAliveTimeoutMs?: number;
  /** With tracing on (`config.tracing`): spans per request. */
  tracing?: Tracing | undefined;
}

export interface ProxyStack {
  proxy: RunningProxy;
  quota: QuotaGuard;
  cache: (ForwardStage & { stats(): object }) | undefined;
  dispatcher: Dispatcher;
}

/** The response cache, loaded with lru-cache only when a rule names a prefix. */
async function cacheFor(
  config: Config,
  parts: ProxyStackParts,
): Promise<ProxyStack['cache'] | undefined> {
  if (parts.cache !== undefined) return parts.cache as ProxyStack['cache'];
  if (config.cache.rules.length === 0) return undefined;
  const { createResponseCache } = await import('./proxy/cache/response-cache.js');
  return createResponseCache({
    settings: config.cache,
    clock: parts.clock,
    metrics: parts.metrics,
    maxWaitMs: config.upstream.timeoutMs + config.upstream.bodyTimeoutMs,
    shared: parts.sharedCache,
  });
}

/**
 * The request path as it ships: the upstream pool, the cache first (a hit takes no rate-limit
 * slot, docs/quota-guard.md), then the quota guard, then the forwarder behind the proxy listener.
 */
export async function startProxyStack(config: Config, parts: ProxyStackParts): Promise<ProxyStack> {
  const { metrics, clock, teardown } = parts;
  const dispatcher = await createApiDispatcher(config, parts.ca);
  teardown.push(() => dispatcher.close());
  const cache = await cacheFor(config, parts);
  const quota = new QuotaGuard({
    shared: parts.shared,
    rateLimit: config.upstream.rateLimit,
    queueMs: config.upstream.queueMs,
    maxCooldownSeconds: config.upstream.maxCooldownSeconds,
    maxQueued: config.proxy.maxInFlight,
    callers: new Callers({
      own: config.quota.caller,
      header: config.quota.callerHeader,
      policies: config.quota.callers,
    }),
    clock,
    metrics,
    logger: parts.logger.child({ component: 'quota' }),
  });
  metrics.bindQuotaState(quota);
  quota.start();
  teardown.push(() => quota.close());
  const proxy = await startProxy(
    {
      upstream: config.upstream,
      proxy: { ...config.proxy, keepAliveTimeoutMs: parts.keepAliveTimeoutMs },
    },
    {
      dispatcher,
      tokens: parts.tokens,
      metrics,
      logger: parts.logger.child({ component: 'proxy' }),
      requestLog: parts.requestLog,
      clock,
      stages: cache ? [cache, quotaStage(quota)] : [quotaStage(quota)],
      tracing: parts.tracing,
    },
  );
  teardown.push(() => proxy.drain(0));
  return { proxy, quota, cache, dispatcher };
}

/** Longest SIGTERM waits for queued spans to reach the collector (within the drain). */
const TRACING_FLUSH_MS = 5_000;

/**
 * Tracing, loaded only when configured (telemetry/tracing.ts): its queue is flushed last, after
 * the proxy's drain, so the drained requests' spans go too.
 */
async function tracingFor(
  config: Config,
  parts: { logger: Logger; metrics: SidecarMetrics; teardown: Teardown },
): Promise<Tracing | undefined> {
  if (config.tracing === undefined) return undefined;
  const tracing = await startTracing(config.tracing, {
    logger: parts.logger.child({ component: 'tracing' }),
    dropped: parts.metrics.tracingSpansDropped(),
    pathPrefixes: config.upstream.pathPrefixes,
    upstream: config.upstream.baseUrl,
    tokenUrl: config.token.url,
    version: VERSION,
  });
  parts.teardown.push(() => tracing.shutdown(TRACING_FLUSH_MS));
  return tracing;
}

/** Wire and start the token keeper, the proxy listener and the admin listener. */
export async function startSidecar(config: Config, deps: SidecarDeps): Promise<RunningSidecar> {
  const { logger } = deps;
  logConfiguration(logger, config);
  const clock = deps.clock ?? systemClock;
  const teardown = new Teardown();
  const registry = createMetricsRegistry();
  const metrics = createMetrics({ registry });
  const caPem = readCa(config, deps.extraCaPem);
  // TLS verification is always on: the extra CA is added to the system roots, never replaces checks.
  const ca = caPem === undefined ? undefined : trustContext(caPem);
  const tokenDispatcher = await createTokenDispatcher(config, ca);
  teardown.push(() => tokenDispatcher.close());
  const requestLog =
    deps.logSink === undefined
      ? undefined
      : createRequestLog({ level: config.log.level, sink: deps.logSink });
  const flush = (): void => {
    requestLog?.flush();
    deps.logSink?.flushSync?.();
  };
  try {
    const tracing = await tracingFor(config, { logger, metrics, teardown });
    const keeper = await startKeeper(config, {
      logger,
      clock,
      metrics,
      teardown,
      endpoint: tokenEndpointFor(config, tokenDispatcher),
      traceGrant: tracing === undefined ? undefined : (grant) => tracing.grant(grant),
    });
    const stack = await startProxyStack(config, {
      tokens: keeper.keeper,
      metrics,
      logger,
      requestLog,
      clock,
      teardown,
      ca,
      shared: await openSharedQuota(config, keeper.store?.connection),
      sharedCache: await openSharedCache(config, keeper, clock),
      tracing,
    });
    const admin = await startAdminServer({
      app: createAdminApp({
        registry,
        version: VERSION,
        startedAt: clock.now(),
        now: () => clock.now(),
        state: adminState(keeper, stack, config),
      }),
      listen: config.admin.listen,
    });
    // The admin listener answers readiness 503 while the proxy drains, so it closes after it.
    teardown.push(() => admin.close());
    logListening(logger, config, stack.proxy.address, admin.address);
    let shutdown: Promise<void> | undefined;
    return {
      proxyAddress: stack.proxy.address,
      adminAddress: admin.address,
      keeper: keeper.keeper,
      registry,
      flush,
      shutdown: () =>
        (shutdown ??= (async () => {
          logger.info(
            { drainTimeoutMs: DRAIN_TIMEOUT_MS },
            'shutting down: draining the proxy listener',
          );
          await stack.proxy.drain(DRAIN_TIMEOUT_MS);
          flush();
          await teardown.run();
          logger.info('shut down');
        })()),
    };
  } catch (error) {
    await teardown.run();
    throw error;
  }
}

interface StartedKeeper {
  keeper: TokenKeeper;
  store: FleetStore | undefined;
  readCredentials: CredentialsReader;
}

/** The credentials reader, the fleet store and the keeper that uses both. */
async function startKeeper(
  config: Config,
  deps: {
    logger: Logger;
    clock: Clock;
    metrics: SidecarMetrics;
    teardown: Teardown;
    endpoint: TokenEndpoint;
    traceGrant: TokenKeeperOptions['traceGrant'];
  },
): Promise<StartedKeeper> {
  const { logger, clock, metrics } = deps;
  const readCredentials = createCredentialsReader(config.credentials, undefined, {
    clock,
    // Fingerprints only: neither the client id nor the secret is ever logged.
    onChange: ({ previous, current }) => {
      logger.info(
        { component: 'token', event: 'credentials', previous, current },
        'client credentials changed; using the new ones',
      );
      // Only the keeper's attempts read the credentials, so the keeper exists by then.
      keeper.credentialsChanged();
    },
  });
  const store = await openFleetStore(config, { ...deps, readCredentials });
  const keeper = new TokenKeeper({
    endpoint: deps.endpoint,
    readCredentials,
    settings: config.token,
    clock,
    logger: logger.child({ component: 'token' }),
    metrics,
    coordinator: store?.coordinator,
    traceGrant: deps.traceGrant,
  });
  metrics.bindTokenState(keeper);
  if (store !== undefined) metrics.bindStoreState(store.coordinator);
  keeper.start();
  deps.teardown.push(() => keeper.stop());
  return { keeper, store, readCredentials };
}

function adminState({ keeper, store }: StartedKeeper, stack: ProxyStack, config: Config) {
  const { cache, quota, proxy } = stack;
  return {
    egressStatus: () => egressSummary(config.egress, config.upstream.baseUrl, config.token.url),
    tokenReady: () => keeper.status().ready,
    isDraining: () => proxy.isDraining(),
    tokenStatus: () => ({ ...keeper.status() }),
    ...(store !== undefined && { storeStatus: () => ({ ...store.coordinator.status() }) }),
    cacheStatus: () =>
      cache
        ? { enabled: true, ...cache.stats() }
        : { enabled: false, shared: false, entries: 0, bytes: 0 },
    quotaStatus: () => quota.status(),
  };
}
