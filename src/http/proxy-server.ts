/**
 * The proxy listener, HTTP/1.1 or h2c (prior knowledge), with the proxy handler as its request
 * listener. Assembles named pieces: the pipelining gate (admission.ts), the answers to what the
 * parser refused and to CONNECT (answers.ts), idle connections and the drain (drain.ts).
 */
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from 'node:http';
import {
  createServer as createH2cServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type Http2Session,
} from 'node:http2';
import type { Socket } from 'node:net';
import { systemClock, type Clock } from '../clock.js';
import type { HostPort } from '../config/types.js';
import { createPipelineGate, type InFlightLimit } from '../proxy/admission.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { createClientErrorHandler, installConnectRefusal } from './answers.js';
import { createDrain, type DrainState } from './drain.js';
import {
  createIdleSweep,
  persistent,
  KEEP_ALIVE_GRACE_MS,
  KEEP_ALIVE_TIMEOUT_MS,
} from './idle-connections.js';
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
  /** Counts refusals that never reach the handler (CONNECT, parse errors). */
  metrics: Pick<SidecarMetrics, 'proxyRejected'>;
  clock?: Clock;
  /** HTTP/1.1 keep-alive timeout (advertised; idle connections closed 1 s after it). Tests shorten it. */
  keepAliveTimeoutMs?: number;
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

/** Bytes a client socket of the HTTP/1.1 listener buffers in the process before backpressure. */
export const SOCKET_HIGH_WATER_MARK = 16 * 1024;

/**
 * HTTP/1.1 server settings. Request bodies are bounded by `proxy.bodyTimeoutMs` (a pause). The
 * keep-alive timeout is the idle sweep's (idle-connections.ts), not node's.
 */
export const HTTP1_OPTIONS = {
  /** Slow-loris guard: all request headers within this. */
  headersTimeout: 30_000,
  /** 0: a request body streams at the upstream's pace; `proxy.bodyTimeoutMs` bounds its pauses. */
  requestTimeout: 0,
  /** Off: node would arm a socket timer after every answer; the idle sweep closes idle connections. */
  keepAliveTimeout: 0,
  /**
   * A request without Content-Length or Transfer-Encoding has no body (RFC 9112 §6.3): node (≥ 24.12)
   * then skips its request stream's life cycle (no 'data', 'end' or 'close' events; the saving:
   * docs/benchmarks.md "Keep-alive sweep"). The forwarder never
   * reads the body of such a request (request-body.ts `mayHaveBody`). Node 20 ignores the option.
   */
  optimizeEmptyRequests: true,
  /**
   * Each client socket buffers at most 16 KiB in the process before `write` says "not reading"
   * (node 22+ defaults to 64 KiB): a slow reader is noticed sooner, and writes to a socket whose
   * peer advertises a tiny window stay small (docs/design.md "Bounded work", slow readers).
   */
  highWaterMark: SOCKET_HIGH_WATER_MARK,
} as const;

/** RFC 9113 §5.1.2: the h2 streams one session may have open at once (docs/design.md "Bounded work"). */
export const H2_MAX_CONCURRENT_STREAMS = 100;

/**
 * The HTTP/1.1 listener: the pipelining gate in front of the handler, the idle sweep for the
 * keep-alive timeout, and each request's keep-alive decision passed to the handler.
 */
function createHttp1Listener(options: ProxyServerOptions, clock: Clock): Server {
  const keepAliveMs = options.keepAliveTimeoutMs ?? KEEP_ALIVE_TIMEOUT_MS;
  // As node writes it from `server.keepAliveTimeout`, which stays 0 (HTTP1_OPTIONS).
  const keepAlive = `timeout=${Math.floor(keepAliveMs / 1000)}`;
  const { handler, drainState } = options;
  // `optimizeEmptyRequests` is newer than the Node 20 types.
  const http1 = createHttpServer({ ...HTTP1_OPTIONS } as ServerOptions);
  // node drops fields past this count; one more than the limit lets the handler answer 431.
  http1.maxHeadersCount = options.maxHeaders + 1;
  const gate = createPipelineGate<IncomingMessage, ServerResponse>(
    options.maxPipelined,
    (req, res) => {
      // Draining: the answer closes its connection; else a persistent one advertises the timeout.
      if (drainState.isDraining()) {
        res.setHeader('connection', 'close');
        void handler(req, res);
      } else void handler(req, res, persistent(req) ? keepAlive : undefined);
    },
  );
  http1.on('request', gate.admit);
  const idle = createIdleSweep<Socket>({
    closeAfterMs: keepAliveMs + KEEP_ALIVE_GRACE_MS,
    busy: gate.busy,
    clock,
  });
  http1.on('connection', idle.track);
  http1.once('close', () => idle.stop());
  http1.on('clientError', createClientErrorHandler(options));
  return http1;
}

/** The h2c listener (prior knowledge); its sessions are tracked for the drain. */
function createH2cListener(options: ProxyServerOptions, sessions: Set<Http2Session>): Http2Server {
  const { handler } = options;
  const server = createH2cServer({
    settings: { maxConcurrentStreams: H2_MAX_CONCURRENT_STREAMS },
    // A few over the limit still reach the handler's 431; far over it, node resets the stream.
    maxHeaderListPairs: options.maxHeaders + 16,
  });
  server.on('request', (req: Http2ServerRequest, res: Http2ServerResponse) => {
    void handler(req, res);
  });
  server.on('session', (session: Http2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  return server;
}

export async function startProxyServer(options: ProxyServerOptions): Promise<ProxyServer> {
  const { logger } = options;
  const clock = options.clock ?? systemClock;
  const sessions = new Set<Http2Session>();
  const server = options.http2
    ? createH2cListener(options, sessions)
    : createHttp1Listener(options, clock);
  installConnectRefusal(server, options);

  const address = await listen(server, options.listen, {
    env: 'PROXY_LISTEN',
    key: 'proxy.listen',
  });
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
