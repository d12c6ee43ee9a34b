/**
 * Answers written straight to a socket the HTTP layer gave up on: requests node's parser refused
 * (bad bytes, authority-form targets, oversized headers, header timeout) and CONNECT. Each ends
 * the connection, and the socket is released within 1 s even if the client never reads or closes
 * (DESIGN.md "Bounded work": the server is half-open-capable, so `end()` alone keeps the fd).
 */
import type { Duplex } from 'node:stream';
import { SidecarError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { errorAnswer, type ErrorAnswer } from './error-handler.js';
import { resolveRequestId } from './request-id.js';

/** A socket the sidecar closed is destroyed this long after its answer, read or not. */
export const CLOSED_SOCKET_RELEASE_MS = 500;

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/** End `socket` with `bytes`, then destroy it within CLOSED_SOCKET_RELEASE_MS whatever the client does. */
export function endAndRelease(socket: Duplex, bytes: string): void {
  socket.on('error', () => socket.destroy());
  socket.end(bytes);
  const timer = setTimeout(() => socket.destroy(), CLOSED_SOCKET_RELEASE_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

/** The envelope as raw HTTP/1.1 with `Connection: close`. */
export function writeRawAnswer(socket: Duplex, answer: ErrorAnswer): void {
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

export interface ClientErrorOptions {
  logger: Logger;
  metrics?: Pick<SidecarMetrics, 'proxyRejected'>;
}

/** node:http `clientError` listener: the envelope for what the parser refused, then release. */
export function createClientErrorHandler(options: ClientErrorOptions) {
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
    options.metrics?.proxyRejected.inc({ code: error.code });
    options.logger.info(
      { requestId, status: error.status, parseError: err.code },
      'request refused by the HTTP parser',
    );
    writeRawAnswer(socket, errorAnswer(error, requestId));
  };
}
