/**
 * The proxy listener: the Hono app on `@hono/node-server`, HTTP/1.1 or h2c (prior knowledge),
 * with CONNECT refused, raw targets remembered for path safety, and a graceful drain.
 */
import { createAdaptorServer, type Http2Bindings, type HttpBindings } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import {
  createServer as createHttpServer,
  ServerResponse,
  type IncomingMessage,
  type Server,
} from 'node:http';
import {
  createServer as createH2cServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type Http2Session,
} from 'node:http2';
import type { Duplex } from 'node:stream';
import { systemClock, type Clock } from '../clock.js';
import type { HostPort } from '../config/types.js';
import { SidecarError } from '../errors.js';
import { checkRequestTarget, pathForLog } from '../proxy/path-safety.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { listen } from './listen.js';
import { errorAnswer } from './error-handler.js';
import { PLACEHOLDER_TARGET, rememberRawTarget } from './raw-target.js';
import { REQUEST_ID_HEADER, resolveRequestId } from './request-id.js';

type NodeRequest = IncomingMessage | Http2ServerRequest;
type NodeResponse = ServerResponse | Http2ServerResponse;

export interface FetchApp {
  fetch(request: Request, env: HttpBindings | Http2Bindings): Response | Promise<Response>;
}

export interface ProxyServerOptions {
  app: FetchApp;
  listen: HostPort;
  /** Serve h2c with prior knowledge instead of HTTP/1.1. */
  http2: boolean;
  logger: Logger;
  /** Called when drain() starts, so the app's `isDraining()` turns true. */
  beginDrain?: () => void;
  /** Counts CONNECT refusals, which never reach the app. */
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

/** HTTP/1.1 server timeouts. Request bodies may stream for long (uploads follow upstream speed). */
export const HTTP1_TIMEOUTS = {
  /** Slow-loris guard: all request headers within this. */
  headersTimeout: 30_000,
  /** 0: a request body streams at the upstream's pace; headersTimeout guards the slow start. */
  requestTimeout: 0,
  /** Longer than typical client pools' idle time, so the server is not the one racing to close. */
  keepAliveTimeout: 65_000,
} as const;

/** True once the node response started (the forwarder wrote it): Hono's answer must not be written. */
function responseStarted(res: NodeResponse): boolean {
  return res.headersSent || res.writableEnded || res.destroyed;
}

function refusedConnectAnswer(req: NodeRequest): ReturnType<typeof errorAnswer> {
  const requestId = resolveRequestId(req.headers[REQUEST_ID_HEADER]);
  return errorAnswer(new SidecarError('method_not_allowed', 'CONNECT is not forwarded'), requestId);
}

const REASONS: Record<number, string> = { 400: 'Bad Request', 405: 'Method Not Allowed' };

/** An answer written straight to a socket the HTTP layer gave up on (CONNECT, parse errors). */
function writeRawAnswer(socket: Duplex, answer: ReturnType<typeof errorAnswer>): void {
  const headers = {
    ...answer.headers,
    'content-length': String(Buffer.byteLength(answer.body)),
    connection: 'close',
  };
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.on('error', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${answer.status} ${REASONS[answer.status] ?? ''}\r\n${head}\r\n${answer.body}`,
  );
}

export async function startProxyServer(options: ProxyServerOptions): Promise<ProxyServer> {
  const { logger } = options;
  const clock = options.clock ?? systemClock;
  let draining = false;
  let inFlight = 0;
  let onIdle: (() => void) | undefined;

  // With RESPONSE_ALREADY_SENT, Hono rewraps HEAD answers so the adapter no longer sees the marker
  // (docs/engine-choice.md): whenever the node response already started, tell the adapter so again.
  const fetch = async (request: Request, env: HttpBindings | Http2Bindings): Promise<Response> => {
    const response = await options.app.fetch(request, env);
    return responseStarted(env.outgoing) ? RESPONSE_ALREADY_SENT : response;
  };

  const server = options.http2
    ? (createAdaptorServer({
        fetch,
        createServer: createH2cServer,
        serverOptions: {},
      }) as Http2Server)
    : (createAdaptorServer({
        fetch,
        createServer: createHttpServer,
        serverOptions: { ...HTTP1_TIMEOUTS },
      }) as Server);

  const logConnect = (req: NodeRequest, requestId: string) => {
    options.metrics?.proxyRejected.inc({ code: 'method_not_allowed' });
    logger.info(
      {
        requestId,
        method: 'CONNECT',
        path: pathForLog(req.url ?? ''),
        status: 405,
        durationMs: 0,
        replayed: false,
      },
      'request',
    );
  };

  // Runs before the adapter's listener: remember the raw target, count the request, and hand the
  // adapter a placeholder for targets it would refuse with a bare 400 (the app answers them).
  const onRequest = (req: NodeRequest, res: NodeResponse) => {
    const raw = req.url ?? '';
    rememberRawTarget(req, raw);
    if (!checkRequestTarget(raw, ['/']).ok) req.url = PLACEHOLDER_TARGET;
    if (draining && res instanceof ServerResponse) res.setHeader('connection', 'close');
    inFlight += 1;
    res.once('close', () => {
      inFlight -= 1;
      if (inFlight === 0) onIdle?.();
    });
  };
  server.prependListener('request', onRequest);

  if (options.http2) {
    // node:http2 hands CONNECT streams to a 'connect' listener, else answers a bare 405.
    server.on('connect', (req: Http2ServerRequest, res: Http2ServerResponse) => {
      const answer = refusedConnectAnswer(req);
      logConnect(req, answer.headers[REQUEST_ID_HEADER] ?? '');
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    });
  } else {
    // node:http delivers CONNECT only to a 'connect' listener; without one it drops the socket.
    server.on('connect', (req: IncomingMessage, socket: Duplex) => {
      const answer = refusedConnectAnswer(req);
      logConnect(req, answer.headers[REQUEST_ID_HEADER] ?? '');
      writeRawAnswer(socket, answer);
    });
    // Requests node's parser refuses (authority-form targets, bad bytes) get the envelope too.
    server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => {
      if (err.code === 'ECONNRESET' || !socket.writable) {
        socket.destroy();
        return;
      }
      if (err.code === 'HPE_HEADER_OVERFLOW') {
        socket.end('HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n');
        return;
      }
      if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
        socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
        return;
      }
      const requestId = resolveRequestId(undefined);
      options.metrics?.proxyRejected.inc({ code: 'bad_request' });
      logger.info(
        { requestId, status: 400, parseError: err.code },
        'request refused by the HTTP parser',
      );
      writeRawAnswer(
        socket,
        errorAnswer(new SidecarError('bad_request', 'malformed HTTP request'), requestId),
      );
    });
  }

  const sessions = new Set<Http2Session>();
  if (options.http2) {
    server.on('session', (session: Http2Session) => {
      sessions.add(session);
      session.once('close', () => sessions.delete(session));
    });
  }

  const address = await listen(server, options.listen);
  logger.info({ address, http2: options.http2 }, 'proxy listening');

  async function drain(timeoutMs = 10_000): Promise<void> {
    if (draining) return;
    draining = true;
    options.beginDrain?.();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    const http1 = options.http2 ? undefined : (server as Server);
    http1?.closeIdleConnections();

    // Keep-alive connections go idle as their last response ends; close them as they do.
    let sweeper: ReturnType<Clock['setTimeout']> | undefined;
    const sweep = () => {
      http1?.closeIdleConnections();
      sweeper = clock.setTimeout(sweep, 50);
    };
    if (http1) sweep();

    await new Promise<void>((resolve) => {
      if (inFlight === 0) return resolve();
      const timer = clock.setTimeout(() => {
        logger.warn({ inFlight }, 'drain timed out; closing the remaining connections');
        resolve();
      }, timeoutMs);
      onIdle = () => {
        clock.clearTimeout(timer);
        resolve();
      };
    });
    onIdle = undefined;
    if (sweeper) clock.clearTimeout(sweeper);
    if (http1) http1.closeAllConnections();
    for (const session of sessions) session.close();
    const forced = clock.setTimeout(() => {
      for (const session of sessions) session.destroy();
    }, 1_000);
    await closed;
    clock.clearTimeout(forced);
    logger.info('proxy drained');
  }

  return { server, address, drain };
}
