/**
 * The proxy listener, HTTP/1.1 or h2c (prior knowledge), with the proxy handler as its request
 * listener (which hands refusals to the Hono app, proxy-app.ts). Assembles named pieces: the
 * pipelining gate (admission.ts), client errors (client-errors.ts), CONNECT refusal
 * (connect-refusal.ts) and the drain (drain.ts).
 */
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import {
  createServer as createH2cServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type Http2Session,
} from 'node:http2';
import { systemClock, type Clock } from '../clock.js';
import type { HostPort } from '../config/types.js';
import { createPipelineGate, type InFlightLimit } from '../proxy/admission.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { createClientErrorHandler } from './client-errors.js';
import { installConnectRefusal } from './connect-refusal.js';
import { createDrain, type DrainState } from './drain.js';
import { listen } from './listen.js';
import type { ProxyHandler } from './proxy-handler.js';
import type { RequestLog } from './request-log.js';

export interface ProxyServerOptions {
  handler: ProxyHandler;
  listen: HostPort;
  /** Serve h2c with prior knowledge instead of HTTP/1.1. */
  http2: boolean;
  /** `proxy.maxPipelined`: requests of one HTTP/1.1 connection in progress at once. */
  maxPipelined: number;
  /** `proxy.maxHeaders`: node keeps at most one field more, so the handler can see the excess. */
  maxHeaders: number;
  /** What a drain waits for (the handler counts proxied requests in it). */
  inFlight: InFlightLimit;
  drainState: DrainState;
  logger: Logger;
  requestLog: RequestLog | undefined;
  /** Counts refusals that never reach the app (CONNECT, parse errors). */
  metrics?: Pick<SidecarMetrics, 'proxyRejected'>;
  clock?: Clock;
}

export interface ProxyServer {
  server: Server | Http2Server;
  address: HostPort;
  /**
   * Stop accepting, answer new requests on open connections with 503 `shutting_down`, close idle
   * connections, wait up to `timeoutMs` for in-flight requests, then close whatever is left.
   */
  drain(timeoutMs?: number): Promise<void>;
}

/** HTTP/1.1 server timeouts. Request bodies are bounded by `proxy.bodyTimeoutMs` (a pause). */
export const HTTP1_TIMEOUTS = {
  /** Slow-loris guard: all request headers within this. */
  headersTimeout: 30_000,
  /** 0: a request body streams at the upstream's pace; `proxy.bodyTimeoutMs` bounds its pauses. */
  requestTimeout: 0,
  /** Longer than typical client pools' idle time, so the server is not the one racing to close. */
  keepAliveTimeout: 65_000,
} as const;

/** RFC 9113 §5.1.2: the h2 streams one session may have open at once (docs/design.md "Bounded work"). */
export const H2_MAX_CONCURRENT_STREAMS = 100;

export async function startProxyServer(options: ProxyServerOptions): Promise<ProxyServer> {
  const { logger } = options;
  const clock = options.clock ?? systemClock;

  const { handler } = options;
  const dispatch = (
    req: Http2ServerRequest | IncomingMessage,
    res: Http2ServerResponse | ServerResponse,
  ): void => {
    void handler(req, res);
  };

  let server: Server | Http2Server;
  if (options.http2) {
    server = createH2cServer({
      settings: { maxConcurrentStreams: H2_MAX_CONCURRENT_STREAMS },
      // A few over the limit still reach the handler's 431; far over it, node resets the stream.
      maxHeaderListPairs: options.maxHeaders + 16,
    });
    server.on('request', dispatch);
  } else {
    const http1 = createHttpServer({ ...HTTP1_TIMEOUTS });
    // node drops fields past this count; one more than the limit lets the handler answer 431.
    http1.maxHeadersCount = options.maxHeaders + 1;
    const gate = createPipelineGate<IncomingMessage, ServerResponse>(
      options.maxPipelined,
      (req, res) => {
        if (options.drainState.isDraining()) res.setHeader('connection', 'close');
        dispatch(req, res);
      },
    );
    http1.on('request', gate.admit);
    http1.on('clientError', createClientErrorHandler({ logger, metrics: options.metrics }));
    server = http1;
  }
  installConnectRefusal(server, options.http2, {
    requestLog: options.requestLog,
    metrics: options.metrics,
  });

  const sessions = new Set<Http2Session>();
  if (options.http2) {
    server.on('session', (session: Http2Session) => {
      sessions.add(session);
      session.once('close', () => sessions.delete(session));
    });
  }

  const address = await listen(server, options.listen);
  logger.info({ address, http2: options.http2 }, 'proxy listening');

  const drain = createDrain({
    server,
    http2: options.http2,
    state: options.drainState,
    inFlight: options.inFlight,
    sessions,
    logger,
    clock,
  });
  return { server, address, drain };
}
