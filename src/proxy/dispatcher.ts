import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import type { Dispatcher } from 'undici';
// By path, not `from 'undici'`: the package index also loads fetch, WebSocket, EventSource, the
// cache stores and the mock agents: idle RSS in every pod (docs/benchmarks.md "Footprint"). Typed
// in src/types/undici-deep.d.ts; dispatcher.test.ts fails if an undici upgrade moves them
// (package.json pins `~7.30`).
import buildConnector from 'undici/lib/core/connect.js';
import Agent from 'undici/lib/dispatcher/agent.js';
import { proxyFor } from '../config/egress.js';
import { cappedPool, socketCap } from './connection-cap.js';
import type { Config } from '../config/types.js';

/** Idle keep-alive sockets close after this long by default: under most servers' 5 s. */
const KEEP_ALIVE_MS = 4_000;

export interface UpstreamDispatcherOptions {
  /**
   * Extra PEM CA bundle (`upstream.caFile` contents), trusted on top of the system roots, or a
   * context from `trustContext()` to share between dispatchers.
   */
  ca?: string | SecureContext;
  /** Offer HTTP/2 through ALPN (`upstream.http2`). */
  http2: boolean;
  /**
   * Connections per origin (`upstream.maxConnections`); further requests wait in the pool's queue
   * for a free one. Unlimited when absent (the token endpoint's own dispatcher).
   */
  connections?: number;
  /** Idle keep-alive sockets are closed after this long. Default 4 s (under most servers' 5 s). */
  keepAliveTimeoutMs?: number;
  /**
   * The one origin this dispatcher serves (the upstream): a single undici Pool then, so
   * `connections` is a hard cap. Without it, an Agent (a Pool per origin: the token endpoint).
   */
  origin?: string;
}

/**
 * The keep-alive dispatcher: for the upstream one undici Pool for its origin, for the token
 * endpoint an Agent. TLS verification is always on; an extra CA only widens the trusted roots, it
 * never replaces them.
 *
 * Why a Pool and not an Agent for the upstream: an Agent drops its Pool for an origin whenever
 * its count of connected sockets reaches zero and makes a new one for the next request, while the
 * old Pool is still closing with its requests and connections. Under connection churn (an h2 reset
 * storm aborting requests in flight) that made two or three Pools of `connections` each at once:
 * up to 48 upstream connections with a cap of 16 (test/flood.test.ts).
 */
export function createUpstreamDispatcher(options: UpstreamDispatcherOptions): Dispatcher {
  const secureContext = typeof options.ca === 'string' ? trustContext(options.ca) : options.ca;
  const tls = secureContext === undefined ? {} : { secureContext };
  const settings = {
    allowH2: options.http2,
    connections: options.connections ?? null,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? KEEP_ALIVE_MS,
  };
  if (options.origin === undefined) return new Agent({ ...settings, connect: tls });
  const connect = buildConnector({ ...tls, allowH2: options.http2 });
  const cap = options.connections === undefined ? undefined : socketCap(options.connections);
  return cappedPool(new URL(options.origin).origin, { ...settings, connect }, cap);
}

/**
 * {@link createUpstreamDispatcher}, or with `proxy` (the egress proxy config/egress.ts chose for
 * the origin) a dispatcher whose connections are `CONNECT` tunnels through it, with the same
 * limits, keep-alive and h2 offer per origin. The proxy's module and undici's proxy agent are
 * loaded only then.
 */
export async function createDispatcher(
  options: UpstreamDispatcherOptions & { proxy: string | undefined },
): Promise<Dispatcher> {
  if (options.proxy === undefined) return createUpstreamDispatcher(options);
  const { createEgressDispatcher } = await import('./egress-agent.js');
  return createEgressDispatcher({
    proxy: options.proxy,
    secureContext: typeof options.ca === 'string' ? trustContext(options.ca) : options.ca,
    http2: options.http2,
    connections: options.connections ?? null,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? KEEP_ALIVE_MS,
  });
}

/** The API's pool (`upstream.*`), through the egress proxy when one applies to it. */
export function createApiDispatcher(
  config: Pick<Config, 'upstream' | 'egress'>,
  ca: UpstreamDispatcherOptions['ca'],
): Promise<Dispatcher> {
  const { baseUrl, http2, maxConnections } = config.upstream;
  const proxy = proxyFor(config.egress, baseUrl);
  return createDispatcher({ ca, http2, connections: maxConnections, origin: baseUrl, proxy });
}

/** The token endpoint's own dispatcher, through the egress proxy when one applies to it. */
export function createTokenDispatcher(
  config: Pick<Config, 'token' | 'egress'>,
  ca: UpstreamDispatcherOptions['ca'],
): Promise<Dispatcher> {
  return createDispatcher({ ca, http2: false, proxy: proxyFor(config.egress, config.token.url) });
}

/**
 * The system roots plus `ca`, parsed once. Passing `connect.ca` instead would make node build a
 * context from the system roots for every new TLS connection, blocking the event loop each time
 * (how long: docs/engine-choice.md).
 */
export function trustContext(ca: string): SecureContext {
  return createSecureContext({ ca: [...rootCertificates, ca] });
}
