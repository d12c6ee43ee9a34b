/**
 * The request path as it ships (docs/design.md "Layout and one request's path"): the upstream pool,
 * the response cache, the quota guard and the forwarder behind the proxy listener. The proxy
 * integration tests start it too.
 */
import type { SecureContext } from 'node:tls';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import type { Config } from '../config/types.js';
import type { SharedCacheEntries } from '../fleet/ports.js';
import type { RequestLog } from '../http/request-log.js';
import { startProxy, type RunningProxy } from '../http/start-proxy.js';
import type { CallerAuth } from '../callers/index.js';
import { readTextFile } from '../config/credentials.js';
import { proxyFor } from '../config/egress.js';
import { createApiDispatcher, createDispatcher } from '../proxy/dispatcher.js';
import type { ForwardStage } from '../proxy/forwarder.js';
import { Callers } from '../proxy/quota/callers.js';
import { QuotaGuard, type SharedQuota } from '../proxy/quota/guard.js';
import { quotaStage } from '../proxy/quota/stage.js';
import type { AccessTokenSource } from '../proxy/types.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { Teardown } from './teardown.js';

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
  /** With `callers.auth: jwt`: the callers' keys and the stage that verifies them. */
  callers: CallerAuth | undefined;
}

/**
 * Caller identity, loaded with jose only with `callers.auth: jwt`: its keys' dispatcher trusts
 * `callers.jwt.caFile` (not the upstream's CA) and honours the egress proxy settings.
 */
async function callersFor(config: Config, parts: ProxyStackParts): Promise<CallerAuth | undefined> {
  const { callers } = config;
  if (callers.auth === 'none') return undefined;
  const { startCallerAuth } = await import('../callers/index.js');
  const { jwt } = callers;
  let dispatcher: Dispatcher | undefined;
  if (jwt.keys.kind !== 'file') {
    const target = jwt.keys.kind === 'url' ? jwt.keys.url : jwt.issuer;
    dispatcher = await createDispatcher({
      ca: jwt.caFile === undefined ? undefined : await readTextFile(jwt.caFile),
      http2: false,
      proxy: proxyFor(config.egress, target),
    });
    const opened = dispatcher;
    parts.teardown.push(() => opened.close());
  }
  const auth = startCallerAuth(callers, {
    dispatcher,
    // Regular files only, as credentials are read: a FIFO or device would block a libuv thread
    // at each attempt, forever (four of them, and DNS and file reads stall for the whole process).
    readFile: readTextFile,
    clock: parts.clock,
    logger: parts.logger.child({ component: 'callers' }),
    counts: (keys) => parts.metrics.callerAuth(keys),
  });
  parts.teardown.push(() => auth.stop());
  return auth;
}

/**
 * The quota's callers: `quota.callers`, and each rule's caller as a listed one (weight 1,
 * `interactive`, unless `quota.callers` says otherwise): the operator named it, no caller can invent it.
 */
function callerPolicies(config: Config): Config['quota']['callers'] {
  const policies = [...config.quota.callers];
  if (config.callers.auth === 'none') return policies;
  for (const rule of config.callers.rules) {
    if (!policies.some((p) => p.name === rule.caller)) {
      policies.push({ name: rule.caller, weight: 1, priority: 'interactive' });
    }
  }
  return policies;
}

/** The response cache, loaded with lru-cache only when a rule names a prefix. */
async function cacheFor(
  config: Config,
  parts: ProxyStackParts,
): Promise<ProxyStack['cache'] | undefined> {
  if (parts.cache !== undefined) return parts.cache as ProxyStack['cache'];
  if (config.cache.rules.length === 0) return undefined;
  const { createResponseCache } = await import('../proxy/cache/response-cache.js');
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
  const callers = await callersFor(config, parts);
  const quota = new QuotaGuard({
    shared: parts.shared,
    rateLimit: config.upstream.rateLimit,
    queueMs: config.upstream.queueMs,
    maxCooldownSeconds: config.upstream.maxCooldownSeconds,
    maxQueued: config.proxy.maxInFlight,
    callers: new Callers({
      own: config.quota.caller,
      header: config.quota.callerHeader,
      policies: callerPolicies(config),
      identified: callers !== undefined,
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
      // Who calls first: an unverified caller gets no cached answer and takes no rate-limit slot.
      stages: [callers?.stage, cache, quotaStage(quota)].filter(
        (stage): stage is ForwardStage => stage !== undefined,
      ),
      tracing: parts.tracing,
    },
  );
  teardown.push(() => proxy.drain(0));
  return { proxy, quota, cache, dispatcher, callers };
}
