/**
 * The running sidecar, built from the configuration: token keeper, fleet store, quota guard,
 * response cache, proxy and admin listeners. Everything built is pushed on one teardown stack, which
 * both a failed start and `shutdown()` unwind.
 */
import { createMetricsRegistry, type MetricsRegistry } from './telemetry/exposition.js';
import { readFileSync } from 'node:fs';
import type { Dispatcher } from 'undici';
import { systemClock, type Clock } from './clock.js';
import { createCredentialsReader } from './config/credentials.js';
import type { Config, CredentialsReader } from './config/types.js';
import { createAdminApp } from './http/admin-app.js';
import { startAdminServer, type AdminServer } from './http/admin-server.js';
import { createRequestLog } from './http/request-log.js';
import { egressSummary } from './config/egress.js';
import { createTokenDispatcher, trustContext } from './proxy/dispatcher.js';
import type { Logger } from './telemetry/logger.js';
import { createMetrics, type SidecarMetrics } from './telemetry/metrics.js';
import { startTracing } from './telemetry/start-tracing.js';
import type { Tracing } from './telemetry/tracing.js';
import { createTokenEndpointClient } from './token/client.js';
import { TokenKeeper, type TokenKeeperOptions } from './token/keeper.js';
import type { TokenEndpoint } from './token/types.js';
import { logConfiguration, logListening } from './startup-log.js';
import { startProxyStack, type ProxyStack } from './sidecar/proxy-stack.js';
import {
  openFleetStore,
  openSharedCache,
  openSharedQuota,
  type FleetStore,
} from './sidecar/store.js';
import { Teardown } from './sidecar/teardown.js';
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
    const admin = await startAdmin(config, { keeper, stack, registry, clock, teardown });
    logListening(logger, config, stack.proxy.address, admin.address);
    return running({ stack, admin, keeper: keeper.keeper, registry, flush, teardown, logger });
  } catch (error) {
    await teardown.run();
    throw error;
  }
}

/** The admin listener; it answers readiness 503 while the proxy drains, so it closes after it. */
async function startAdmin(
  config: Config,
  parts: {
    keeper: StartedKeeper;
    stack: ProxyStack;
    registry: MetricsRegistry;
    clock: Clock;
    teardown: Teardown;
  },
): Promise<AdminServer> {
  const { clock } = parts;
  const admin = await startAdminServer({
    app: createAdminApp({
      registry: parts.registry,
      version: VERSION,
      startedAt: clock.now(),
      now: () => clock.now(),
      state: adminState(parts.keeper, parts.stack, config),
    }),
    listen: config.admin.listen,
  });
  parts.teardown.push(() => admin.close());
  return admin;
}

/** The started sidecar; `shutdown()` drains the proxy, flushes the request lines, then unwinds. */
function running(parts: {
  stack: ProxyStack;
  admin: AdminServer;
  keeper: TokenKeeper;
  registry: MetricsRegistry;
  flush: () => void;
  teardown: Teardown;
  logger: Logger;
}): RunningSidecar {
  const { stack, logger } = parts;
  let shutdown: Promise<void> | undefined;
  return {
    proxyAddress: stack.proxy.address,
    adminAddress: parts.admin.address,
    keeper: parts.keeper,
    registry: parts.registry,
    flush: parts.flush,
    shutdown: () =>
      (shutdown ??= (async () => {
        logger.info(
          { drainTimeoutMs: DRAIN_TIMEOUT_MS },
          'shutting down: draining the proxy listener',
        );
        await stack.proxy.drain(DRAIN_TIMEOUT_MS);
        parts.flush();
        await parts.teardown.run();
        logger.info('shut down');
      })()),
  };
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
  const { cache, quota, proxy, callers } = stack;
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
    ...(callers !== undefined && {
      callerKeysReady: () => callers.ready(),
      callersStatus: () => callers.status(),
    }),
  };
}
