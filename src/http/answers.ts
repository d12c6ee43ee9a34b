/**
 * The one place that turns a refusal or a failure into the answer the client sees
 * (docs/design.md "Practices" 4): the envelope, the count of `proxy_rejected`, the log line, and
 * the bytes, on a node response or on a socket the HTTP layer gave up on.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Http2Server, Http2ServerRequest } from 'node:http2';
import type { Duplex } from 'node:stream';
import { systemClock, type Clock } from '../clock.js';
import { SidecarError, asSidecarError, errorEnvelope, type ProxyErrorCode } from '../errors.js';
import type { ClientResponse } from '../proxy/outcome.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { REQUEST_ID_HEADER, resolveRequestId } from './request-id.js';
import type { RequestLog } from './request-log.js';

export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface AnswerOptions {
  logger: Logger;
  metrics: Pick<SidecarMetrics, 'proxyRejected'>;
}

/** What the request line records of an answer the sidecar wrote itself. */
export interface Answered {
  status: number;
  code: ProxyErrorCode;
}

/** A socket the sidecar closed is destroyed this long after its answer, read or not. */
export const CLOSED_SOCKET_RELEASE_MS = 500;

/** After these the connection closes: an unread body cannot be parsed as the next request. */
const CLOSES_CONNECTION: ReadonlySet<ProxyErrorCode> = new Set(['request_timeout']);

/** RFC 6750 §3: a refused bearer names the realm and the error, never which check failed. */
const CALLER_CHALLENGE = 'Bearer realm="oauth-sidecar", error="invalid_token"';

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/** The envelope and headers for `error`; anything not a SidecarError is a 500. */
export function envelopeAnswer(error: unknown, requestId: string): ErrorAnswer {
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'x-request-id': requestId,
  };
  const known = asSidecarError(error);
  if (known.retryAfterSeconds !== undefined)
    headers['retry-after'] = String(known.retryAfterSeconds);
  if (known.fields !== undefined) Object.assign(headers, known.fields);
  if (known.code === 'method_not_allowed')
    headers.allow = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';
  else if (known.code === 'caller_unauthenticated') headers['www-authenticate'] = CALLER_CHALLENGE;
  return { status: known.status, headers, body: JSON.stringify(errorEnvelope(known, requestId)) };
}

/** Count and log an answered error; its cause goes to the log only (it may name hosts or worse). */
function record(error: unknown, requestId: string, options: AnswerOptions): ProxyErrorCode {
  const { code } = asSidecarError(error);
  options.metrics.proxyRejected.inc({ code });
  if (!(error instanceof SidecarError)) {
    options.logger.error({ err: error, requestId }, 'unexpected error in the proxy');
  } else if (error.cause !== undefined) {
    options.logger.warn({ err: error.cause, requestId, code }, error.message);
  }
  return code;
}

/**
 * Answer `error` on a node response, advertising `keepAlive` (the listener's `Keep-Alive` value
 * for a persistent connection) unless the error closes the connection. A response already started
 * (never expected: the forwarder only rejects before writing) is destroyed instead.
 */
export function answerError(
  res: ClientResponse,
  error: unknown,
  requestId: string,
  options: AnswerOptions,
  keepAlive?: string,
): Answered {
  const code = record(error, requestId, options);
  const answer = envelopeAnswer(error, requestId);
  if (res.headersSent || res.destroyed) {
    if (!res.destroyed) res.destroy();
    return { status: answer.status, code };
  }
  const headers = answer.headers;
  headers['content-length'] = String(Buffer.byteLength(answer.body));
  if (CLOSES_CONNECTION.has(code) && !('stream' in res)) headers.connection = 'close';
  else if (keepAlive !== undefined) headers['keep-alive'] = keepAlive;
  res.writeHead(answer.status, headers);
  res.end(answer.body);
  return { status: answer.status, code };
}

/** End `socket` with `bytes`, then destroy it within CLOSED_SOCKET_RELEASE_MS whatever the client does. */
export function endAndRelease(
  socket: Duplex,
  bytes: string,
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout'> = systemClock,
): void {
  socket.on('error', () => socket.destroy());
  socket.end(bytes);
  const timer = clock.setTimeout(() => socket.destroy(), CLOSED_SOCKET_RELEASE_MS);
  timer.unref?.();
  socket.once('close', () => clock.clearTimeout(timer));
}

/** Answer `error` as raw HTTP/1.1 on a socket, with `Connection: close`, then release it. */
function answerOnSocket(
  socket: Duplex,
  error: SidecarError,
  requestId: string,
  options: AnswerOptions,
): void {
  record(error, requestId, options);
  const answer = envelopeAnswer(error, requestId);
  const headers = {
    ...answer.headers,
    'content-length': String(Buffer.byteLength(answer.body)),
    connection: 'close',
  };
  let head = '';
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  endAndRelease(
    socket,
    `HTTP/1.1 ${answer.status} ${REASONS[answer.status] ?? ''}\r\n${head}\r\n${answer.body}`,
  );
}

/** node:http `clientError`: the envelope for what the parser refused, then release. */
export function createClientErrorHandler(options: AnswerOptions) {
  return (err: Error & { code?: string }, socket: Duplex): void => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    let error: SidecarError;
    if (err.code === 'HPE_HEADER_OVERFLOW') {
      error = new SidecarError('request_headers_too_large', 'request headers too large');
    } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      error = new SidecarError('request_timeout', 'request headers not received in time');
    } else {
      error = new SidecarError('bad_request', 'malformed HTTP request');
    }
    const requestId = resolveRequestId(undefined);
    options.logger.info(
      { requestId, status: error.status, parseError: err.code },
      'request refused by the HTTP parser',
    );
    answerOnSocket(socket, error, requestId, options);
  };
}

/**
 * CONNECT gets 405 (docs/design.md "Proxy"): node delivers it only to a `connect` listener
 * (node:http drops the socket without one; node:http2 answers a bare 405).
 */
export function installConnectRefusal(
  server: Server | Http2Server,
  options: AnswerOptions & { requestLog: RequestLog | undefined },
): void {
  server.on('connect', (req: IncomingMessage | Http2ServerRequest, second: unknown) => {
    const requestId = resolveRequestId(req.headers[REQUEST_ID_HEADER]);
    const error = new SidecarError('method_not_allowed', 'CONNECT is not forwarded');
    if ('stream' in req) answerError(second as ClientResponse, error, requestId, options);
    else answerOnSocket(second as Duplex, error, requestId, options);
    options.requestLog?.write({
      requestId,
      method: 'CONNECT',
      target: req.url ?? '',
      status: 405,
      durationMs: 0,
      replayed: false,
      code: 'method_not_allowed',
    });
  });
}
