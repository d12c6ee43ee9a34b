import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { Agent, type Dispatcher } from 'undici';

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
}

/**
 * The keep-alive dispatcher for the upstream: an undici Agent, which keeps one Pool per origin.
 * TLS verification is always on; an extra CA only widens the trusted roots, it never replaces them.
 */
export function createUpstreamDispatcher(options: UpstreamDispatcherOptions): Dispatcher {
  const secureContext = typeof options.ca === 'string' ? trustContext(options.ca) : options.ca;
  return new Agent({
    allowH2: options.http2,
    connections: options.connections ?? null,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4_000,
    ...(secureContext === undefined ? {} : { connect: { secureContext } }),
  });
}

/**
 * The system roots plus `ca`, parsed once. Passing `connect.ca` instead would make node build a
 * context from ~145 certificates for every new TLS connection: 14–50 ms of blocked event loop each
 * (measured by bench/, see README "Benchmarks").
 */
export function trustContext(ca: string): SecureContext {
  return createSecureContext({ ca: [...rootCertificates, ca] });
}
