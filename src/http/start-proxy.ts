/**
 * The proxy listener with everything it serves: forwarder, request handler, server.
 * One function for main.ts and the tests, so the tests run the stack that ships. Concrete
 * instances (dispatcher, token source, metrics, logger) come in from the caller.
 */
import type { Dispatcher } from 'undici';
import { systemClock, type Clock } from '../clock.js';
import type { Config } from '../config/types.js';
import { createInFlightLimit } from '../proxy/admission.js';
import { SlowReaders } from '../proxy/slow-readers.js';
import { Forwarder, type ForwardStage } from '../proxy/forwarder.js';
import type { AccessTokenSource } from '../proxy/types.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { createDrainState } from './drain.js';
import { createProxyHandler } from './proxy-handler.js';
import { startProxyServer, type ProxyServer } from './proxy-server.js';
import type { RequestLog } from './request-log.js';
import type { Tracing } from '../telemetry/tracing.js';

/** The configuration the proxy listener reads. */
export interface ProxySettings {
  upstream: Pick<Config['upstream'], 'baseUrl' | 'pathPrefixes' | 'timeoutMs' | 'bodyTimeoutMs'> & {
    /** `upstream.maxConnections`; default 64. */
    maxConnections?: number;
  };
  proxy: Pick<
    Config['proxy'],
    'listen' | 'http2' | 'maxInFlight' | 'maxPipelined' | 'maxHeaders' | 'bodyTimeoutMs'
  > &
    Partial<Pick<Config['proxy'], 'minBodyBytesPerSecond'>> & {
      /** HTTP/1.1 keep-alive timeout; not a configuration key (65 s), tests shorten it. */
      keepAliveTimeoutMs?: number;
    };
}

export interface ProxyDeps {
  /** The upstream pool (createUpstreamDispatcher with `upstream.maxConnections`). */
  dispatcher: Dispatcher;
  tokens: AccessTokenSource;
  metrics: SidecarMetrics;
  logger: Logger;
  /** One line per request; undefined when the log level is above `info`. */
  requestLog: RequestLog | undefined;
  clock?: Clock;
  /** Features on the request path (quota guard, response cache); see proxy/stages.ts. */
  stages?: readonly ForwardStage[];
  /** With tracing on: spans per request (telemetry/tracing.ts). */
  tracing?: Tracing | undefined;
}

export interface RunningProxy extends ProxyServer {
  isDraining(): boolean;
}

/** The forwarder with the pool's and the slots' halves for slow bodies and slow readers. */
function createForwarder(settings: ProxySettings, deps: ProxyDeps, clock: Clock): Forwarder {
  const { logger, metrics } = deps;
  return new Forwarder({
    upstream: settings.upstream.baseUrl,
    dispatcher: deps.dispatcher,
    tokens: deps.tokens,
    timeoutMs: settings.upstream.timeoutMs,
    upstreamBodyTimeoutMs: settings.upstream.bodyTimeoutMs,
    clientBodyTimeoutMs: settings.proxy.bodyTimeoutMs,
    minBodyBytesPerSecond: settings.proxy.minBodyBytesPerSecond,
    // A body streamed upstream holds a pool connection while it arrives: half of them at most
    // (requests receiving a body hold at most half of proxy.maxInFlight: proxy-handler.ts).
    maxBodiesStreaming: Math.max(1, Math.floor((settings.upstream.maxConnections ?? 64) / 2)),
    metrics,
    logger,
    clock,
    stages: deps.stages,
    // Requests whose client is not reading: half the slots and half the upstream connections at
    // most, and a minimum read rate (docs/design.md "Bounded work").
    readers: new SlowReaders({
      maxStalled: Math.max(1, Math.floor(settings.proxy.maxInFlight / 2)),
      maxStalledUpstream: Math.max(1, Math.floor((settings.upstream.maxConnections ?? 64) / 2)),
      minBytesPerSecond: settings.proxy.minBodyBytesPerSecond ?? 0,
      clock,
    }),
  });
}

export async function startProxy(settings: ProxySettings, deps: ProxyDeps): Promise<RunningProxy> {
  const clock = deps.clock ?? systemClock;
  const { logger, metrics, requestLog } = deps;
  const forwarder = createForwarder(settings, deps, clock);
  const inFlight = createInFlightLimit(settings.proxy.maxInFlight);
  metrics.bindRequestsInFlight(() => inFlight.count);
  const drainState = createDrainState();
  const handler = createProxyHandler({
    prefixes: settings.upstream.pathPrefixes,
    forwarder,
    logger,
    requestLog,
    metrics,
    isDraining: drainState.isDraining,
    isCutOff: drainState.isCutOff,
    maxHeaders: settings.proxy.maxHeaders,
    inFlight,
    // Requests still receiving their body hold at most half the slots (docs/design.md "Bounded work").
    receivingBodies: createInFlightLimit(Math.max(1, Math.floor(settings.proxy.maxInFlight / 2))),
    clock,
    tracing: deps.tracing,
  });
  const server = await startProxyServer({
    handler,
    listen: settings.proxy.listen,
    http2: settings.proxy.http2,
    maxPipelined: settings.proxy.maxPipelined,
    maxHeaders: settings.proxy.maxHeaders,
    inFlight,
    drainState,
    logger,
    requestLog,
    metrics,
    clock,
    keepAliveTimeoutMs: settings.proxy.keepAliveTimeoutMs,
  });
  return { ...server, isDraining: drainState.isDraining };
}
