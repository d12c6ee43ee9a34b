import { rootCertificates } from 'node:tls';
import { Agent, type Dispatcher } from 'undici';

export interface UpstreamDispatcherOptions {
  /** Extra PEM CA bundle (`upstream.caFile` contents), trusted on top of the system roots. */
  ca?: string;
  /** Offer HTTP/2 through ALPN (`upstream.http2`). */
  http2: boolean;
  /** Connections per origin; unlimited when absent. */
  connections?: number;
  /** Idle keep-alive sockets are closed after this long. Default 4 s (under most servers' 5 s). */
  keepAliveTimeoutMs?: number;
}

/**
 * The keep-alive dispatcher for the upstream: an undici Agent, which keeps one Pool per origin.
 * TLS verification is always on; an extra CA only widens the trusted roots, it never replaces them.
 */
export function createUpstreamDispatcher(options: UpstreamDispatcherOptions): Dispatcher {
  return new Agent({
    allowH2: options.http2,
    connections: options.connections ?? null,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4_000,
    ...(options.ca === undefined ? {} : { connect: { ca: [...rootCertificates, options.ca] } }),
  });
}
