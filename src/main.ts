#!/usr/bin/env node
/**
 * Composition root (docs/design.md "Module boundaries"): the only reader of process.env and signals, and
 * the only place where concrete instances (dispatchers, registry, logger, clock) are wired together.
 */
import { readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import type { Dispatcher } from 'undici';
import { USAGE, UsageError, parseArgs } from './cli.js';
import { systemClock, type Clock } from './clock.js';
import { runCheck, type Io } from './commands/check.js';
import { DEMO_TOKEN_LIFETIME_SECONDS, runDemo } from './commands/demo.js';
import { createCredentialsReader } from './config/credentials.js';
import { formatConfigProblems, loadConfig } from './config/load.js';
import type { Config, CredentialsReader } from './config/types.js';
import { ConfigError, EXIT_CONFIG } from './errors.js';
import { createAdminApp } from './http/admin-app.js';
import { startAdminServer } from './http/admin-server.js';
import { createRequestLog } from './http/request-log.js';
import { startProxy } from './http/start-proxy.js';
import { createUpstreamDispatcher, trustContext } from './proxy/dispatcher.js';
import { QuotaGuard, type SharedQuota } from './proxy/quota/guard.js';
import type { StoreConnection } from './store/connection.js';
import { quotaStage } from './proxy/quota/stage.js';
import { createLogDestination, createLogger, type Logger } from './telemetry/logger.js';
import { createMetrics } from './telemetry/metrics.js';
import { createTokenEndpointClient } from './token/client.js';
import { TokenKeeper } from './token/keeper.js';
import { createTokenCoordinator, leaseTtlMs, type TokenCoordinator } from './token/shared.js';
import type { TokenEndpoint } from './token/types.js';

/** In-flight requests get this long to finish after SIGTERM (docs/reference.md "Command line"). */
export const DRAIN_TIMEOUT_MS = 10_000;

export { DEMO_TOKEN_LIFETIME_SECONDS };

export const VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

export interface SidecarDeps {
  logger: Logger;
  /** Where the request lines go (the logger's destination); none: no request lines. */
  logSink?: { write(line: string): unknown };
  clock?: Clock;
  /** PEM trusted in addition to the system CAs; read from `upstream.caFile` when absent. */
  extraCaPem?: string;
}

export interface RunningSidecar {
  proxyAddress: { host: string; port: number };
  adminAddress: { host: string; port: number };
  keeper: TokenKeeper;
  registry: Registry;
  /** Drain (readiness 503, stop accepting, finish in-flight up to DRAIN_TIMEOUT_MS), then close everything. */
  shutdown(): Promise<void>;
}

function readCa(config: Config, deps: SidecarDeps): string | undefined {
  if (deps.extraCaPem !== undefined) return deps.extraCaPem;
  return config.upstream.caFile === undefined
    ? undefined
    : readFileSync(config.upstream.caFile, 'utf8');
}

function tokenEndpointFor(config: Config, dispatcher: Dispatcher): TokenEndpoint {
  const { url, format, clientAuth, scopes, timeoutMs } = config.token;
  return createTokenEndpointClient({ url, format, clientAuth, scopes, timeoutMs, dispatcher });
}

/**
 * The shared token store, when `token.store.url` is set (docs/token-store.md). The
 * Redis client is loaded only then. Connecting happens in the background: until the store answers,
 * the keeper works as without one.
 */
async function openTokenStore(
  config: Config,
  deps: { readCredentials: CredentialsReader; logger: Logger; clock: Clock },
): Promise<
  { coordinator: TokenCoordinator; connection: StoreConnection; close(): Promise<void> } | undefined
> {
  const { url, keyPrefix } = config.token.store;
  if (url === undefined) return undefined;
  const { createStoreConnection, createTokenSetStore } = await import('./store/index.js');
  const { clock } = deps;
  const logger = deps.logger.child({ component: 'store' });
  const connection = createStoreConnection({ url, logger, clock });
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
  return { coordinator, connection, close: () => connection.close() };
}

/**
 * The fleet-wide half of the quota guard, on the token store's connection when `token.store.url`
 * is set (docs/quota-guard.md); until the store answers, each process limits alone.
 */
async function openQuotaStore(
  config: Config,
  connection: StoreConnection | undefined,
): Promise<SharedQuota | undefined> {
  if (connection === undefined) return undefined;
  const { createStoreQuota } = await import('./store/quota.js');
  return createStoreQuota({
    connection,
    keyPrefix: config.token.store.keyPrefix,
    upstream: config.upstream.baseUrl,
    rateLimit: config.upstream.rateLimit,
    maxCooldownMs: config.upstream.maxCooldownSeconds * 1000,
  });
}

/** Wire and start the token keeper, the proxy listener and the admin listener. */
export async function startSidecar(config: Config, deps: SidecarDeps): Promise<RunningSidecar> {
  const { logger } = deps;
  const clock = deps.clock ?? systemClock;
  const registry = new Registry();
  const metrics = createMetrics({ registry });
  const caPem = readCa(config, deps);
  const ca = caPem === undefined ? undefined : trustContext(caPem);

  // TLS verification is always on: the extra CA is added to the system roots, never replaces checks.
  const tokenDispatcher = createUpstreamDispatcher({ ca, http2: false });
  const upstreamDispatcher = createUpstreamDispatcher({
    ca,
    http2: config.upstream.http2,
    connections: config.upstream.maxConnections,
    origin: config.upstream.baseUrl,
  });

  const endpoint = tokenEndpointFor(config, tokenDispatcher);
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
  const store = await openTokenStore(config, { readCredentials, logger, clock });
  const keeper = new TokenKeeper({
    endpoint,
    readCredentials,
    settings: config.token,
    clock,
    logger: logger.child({ component: 'token' }),
    metrics,
    coordinator: store?.coordinator,
  });
  metrics.bindTokenState(keeper);
  if (store !== undefined) metrics.bindStoreState(store.coordinator);

  // Off unless a rule names a prefix: then no stage is installed and the request path is unchanged.
  // First among the stages: a hit must not take a rate-limit slot (docs/quota-guard.md).
  // Loaded only then, with lru-cache (docs/benchmarks.md "Footprint").
  const cache =
    config.cache.rules.length > 0
      ? (await import('./proxy/cache/response-cache.js')).createResponseCache({
          settings: config.cache,
          clock,
          metrics,
          maxWaitMs: config.upstream.timeoutMs + config.upstream.bodyTimeoutMs,
        })
      : undefined;

  const sharedQuota = await openQuotaStore(config, store?.connection);
  const quota = new QuotaGuard({
    shared: sharedQuota,
    rateLimit: config.upstream.rateLimit,
    queueMs: config.upstream.queueMs,
    maxCooldownSeconds: config.upstream.maxCooldownSeconds,
    maxQueued: config.proxy.maxInFlight,
    clock,
    metrics,
    logger: logger.child({ component: 'quota' }),
  });
  metrics.bindQuotaState(quota);
  quota.start();

  const adminApp = createAdminApp({
    registry,
    version: VERSION,
    startedAt: clock.now(),
    now: () => clock.now(),
    state: {
      tokenReady: () => keeper.status().ready,
      isDraining: () => proxy?.isDraining() ?? false,
      tokenStatus: () => ({ ...keeper.status() }),
      ...(store !== undefined && { storeStatus: () => ({ ...store.coordinator.status() }) }),
      cacheStatus: () =>
        cache ? { enabled: true, ...cache.stats() } : { enabled: false, entries: 0, bytes: 0 },
      quotaStatus: () => quota.status(),
    },
  });

  keeper.start();
  const requestLog =
    deps.logSink === undefined
      ? undefined
      : createRequestLog({ level: config.log.level, sink: deps.logSink });
  // The last batch of request lines reaches stdout even when the process exits without a
  // shutdown; pino's destination writes what it holds synchronously on exit.
  const flushRequestLogOnExit = (): void => {
    requestLog?.flush();
    (deps.logSink as { flushSync?: () => void } | undefined)?.flushSync?.();
  };
  if (requestLog !== undefined) process.once('exit', flushRequestLogOnExit);
  let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
  let admin: Awaited<ReturnType<typeof startAdminServer>> | undefined;
  try {
    const proxyLogger = logger.child({ component: 'proxy' });
    proxy = await startProxy(config, {
      dispatcher: upstreamDispatcher,
      tokens: keeper,
      metrics,
      logger: proxyLogger,
      requestLog,
      clock,
      stages: cache ? [cache, quotaStage(quota)] : [quotaStage(quota)],
    });
    admin = await startAdminServer({ app: adminApp, listen: config.admin.listen });
  } catch (error) {
    process.off('exit', flushRequestLogOnExit);
    keeper.stop();
    quota.close();
    await proxy?.drain(0);
    await Promise.allSettled([tokenDispatcher.close(), upstreamDispatcher.close(), store?.close()]);
    throw error;
  }
  const proxyServer = proxy;
  const adminServer = admin;
  logger.info(
    {
      proxy: `${proxyServer.address.host}:${proxyServer.address.port}`,
      admin: `${adminServer.address.host}:${adminServer.address.port}`,
      upstream: config.upstream.baseUrl,
      prefixes: config.upstream.pathPrefixes,
      tokenUrl: config.token.url,
      tokenFormat: config.token.format,
      version: VERSION,
    },
    'oauth-sidecar listening',
  );

  let shutdownPromise: Promise<void> | undefined;
  const shutdown = (): Promise<void> => {
    shutdownPromise ??= (async () => {
      logger.info(
        { drainTimeoutMs: DRAIN_TIMEOUT_MS },
        'shutting down: draining the proxy listener',
      );
      await proxyServer.drain(DRAIN_TIMEOUT_MS);
      requestLog?.flush();
      process.off('exit', flushRequestLogOnExit);
      keeper.stop();
      quota.close();
      await adminServer.close();
      await Promise.allSettled([
        tokenDispatcher.close(),
        upstreamDispatcher.close(),
        store?.close(),
      ]);
      logger.info('shut down');
    })();
    return shutdownPromise;
  };

  return {
    proxyAddress: proxyServer.address,
    adminAddress: adminServer.address,
    keeper,
    registry,
    shutdown,
  };
}

type Env = Record<string, string | undefined>;

/** Human-readable logs where pino-pretty is installed (a dev dependency): demo and local runs. */
function prettyAvailable(): boolean {
  try {
    createRequire(import.meta.url).resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}

/**
 * `check` with a store: PING, the server's version, and one read of the token-set entry through
 * the same script the keeper runs (proves the ACL user may run scripts on those keys). Prints
 * `store: ok (redis 7.x)`; returns the reason otherwise.
 */
async function checkStore(
  config: Config,
  credentials: { clientId: string; clientSecret: string },
  io: Io,
): Promise<string | undefined> {
  const url = config.token.store.url;
  if (url === undefined) return undefined;
  const { createStoreConnection, createTokenSetStore, redactStoreUrl } =
    await import('./store/index.js');
  const quiet = createLogger({ level: 'silent' });
  // A one-shot command may wait for the connection (TLS, DNS) longer than a serving process would.
  const connection = createStoreConnection({
    url,
    logger: quiet,
    clock: systemClock,
    commandTimeoutMs: 5_000,
  });
  try {
    const version = await connection.probe();
    await createTokenSetStore({
      connection,
      leaseTtlMs: leaseTtlMs(config.token.timeoutMs),
      keyPrefix: config.token.store.keyPrefix,
      tokenUrl: config.token.url,
      scopes: config.token.scopes,
      readIdentity: () => Promise.resolve(credentials),
      now: () => Date.now(),
    }).read();
    io.out(`store: ok (redis ${version})`);
    return undefined;
  } catch (error) {
    return `${redactStoreUrl(url)}: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    await connection.close();
  }
}

/** `check`: the token endpoint client on its own dispatcher, closed when the check ends. */
async function check(config: Config, io: Io): Promise<number> {
  const ca = readCa(config, {} as SidecarDeps);
  const dispatcher = createUpstreamDispatcher({ ca, http2: false });
  try {
    return await runCheck(config, io, {
      endpoint: tokenEndpointFor(config, dispatcher),
      checkStore: (credentials) => checkStore(config, credentials, io),
    });
  } finally {
    await dispatcher.close();
  }
}

/** `demo`: the stand-in, a pretty logger where available, and the sidecar in front. */
async function demo(env: Env, io: Io): Promise<number | undefined> {
  try {
    return await runDemo(env, io, {
      loadConfig: (demoEnvironment) => loadConfig({ env: demoEnvironment }),
      startSidecar: async (config, caPem) => {
        const pretty = prettyAvailable();
        const destination = pretty ? undefined : createLogDestination();
        const logger = createLogger({ level: config.log.level, pretty, destination });
        logger.info(
          { upstream: config.upstream.baseUrl, tokenLifetimeSeconds: DEMO_TOKEN_LIFETIME_SECONDS },
          'demo: stand-in API started',
        );
        const sidecar = await startSidecar(config, {
          logger,
          logSink: destination ?? prettySink(logger),
          extraCaPem: caPem,
        });
        return Object.assign(sidecar, { logger });
      },
      serve: (sidecar, cleanup) => installSignalHandlers(sidecar, sidecar.logger, cleanup),
    });
  } catch (error) {
    if (error instanceof ConfigError) {
      io.err(formatConfigProblems(error));
      return EXIT_CONFIG;
    }
    io.err(
      `oauth-sidecar demo: cannot start: ${error instanceof Error ? error.message : String(error)}`,
    );
    return 1;
  }
}

/** With pino-pretty, request lines go through the logger so they are pretty too (demo only). */
function prettySink(logger: Logger): { write(lines: string): void } {
  return {
    write(lines) {
      for (const line of lines.split('\n')) {
        if (line === '') continue;
        const {
          level: _level,
          time: _time,
          msg,
          ...fields
        } = JSON.parse(line) as Record<string, unknown>;
        logger.info(fields, String(msg));
      }
    },
  };
}

function installSignalHandlers(
  sidecar: RunningSidecar,
  logger: Logger,
  cleanup?: () => Promise<void>,
): void {
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled) {
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    signalled = true;
    logger.info({ signal }, 'signal received');
    sidecar
      .shutdown()
      .then(() => cleanup?.())
      .then(
        () => {
          logger.flush();
          process.exit(0);
        },
        (error: unknown) => {
          logger.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** Run the CLI. Returns an exit code for one-shot commands; serve and demo keep running. */
export async function run(argv: readonly string[], env: Env, io: Io): Promise<number | undefined> {
  let args;
  try {
    args = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err(`oauth-sidecar: ${error.message}\n${USAGE}`);
    return 64;
  }
  if (args.command === 'help') {
    io.out(USAGE);
    return 0;
  }
  if (args.command === 'version') {
    io.out(VERSION);
    return 0;
  }

  if (args.command === 'demo') return demo(env, io);

  let config: Config;
  try {
    config = await loadConfig({ env, configFile: args.configFile });
  } catch (error) {
    if (error instanceof ConfigError) {
      io.err(formatConfigProblems(error));
      return EXIT_CONFIG;
    }
    throw error;
  }

  if (args.command === 'check') return check(config, io);

  const destination = createLogDestination();
  const logger = createLogger({ level: config.log.level, destination });
  let sidecar: RunningSidecar;
  try {
    sidecar = await startSidecar(config, { logger, logSink: destination });
  } catch (error) {
    logger.fatal({ err: error }, 'cannot start');
    io.err(
      `oauth-sidecar: cannot start: ${error instanceof Error ? error.message : String(error)}`,
    );
    return 1;
  }
  installSignalHandlers(sidecar, logger);
  return undefined;
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === fileURLToPath(import.meta.url);
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  const io: Io = {
    out: (line) => console.log(line),
    err: (line) => console.error(line),
  };
  run(process.argv.slice(2), process.env, io).then(
    (code) => {
      if (code !== undefined) process.exitCode = code;
    },
    (error: unknown) => {
      console.error(
        `oauth-sidecar: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      );
      process.exitCode = 1;
    },
  );
}
