/**
 * CONNECT is refused with 405 (DESIGN.md "Proxy semantics"): node delivers it only to a `connect`
 * listener (node:http drops the socket without one; node:http2 answers a bare 405).
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Http2Server, Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Duplex } from 'node:stream';
import { SidecarError } from '../errors.js';
import { errorAnswer, type ErrorAnswer } from './error-handler.js';
import { writeRawAnswer } from './client-errors.js';
import { REQUEST_ID_HEADER, resolveRequestId } from './request-id.js';
import type { RequestLog } from './request-log.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';

export interface ConnectRefusalOptions {
  requestLog: RequestLog | undefined;
  metrics?: Pick<SidecarMetrics, 'proxyRejected'>;
}

function refuse(
  req: IncomingMessage | Http2ServerRequest,
  options: ConnectRefusalOptions,
): ErrorAnswer {
  const requestId = resolveRequestId(req.headers[REQUEST_ID_HEADER]);
  const answer = errorAnswer(
    new SidecarError('method_not_allowed', 'CONNECT is not forwarded'),
    requestId,
  );
  options.metrics?.proxyRejected.inc({ code: 'method_not_allowed' });
  options.requestLog?.write({
    requestId,
    method: 'CONNECT',
    target: req.url ?? '',
    status: 405,
    durationMs: 0,
    replayed: false,
    code: 'method_not_allowed',
  });
  return answer;
}

export function installConnectRefusal(
  server: Server | Http2Server,
  http2: boolean,
  options: ConnectRefusalOptions,
): void {
  if (http2) {
    server.on('connect', (req: Http2ServerRequest, res: Http2ServerResponse) => {
      const answer = refuse(req, options);
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    });
  } else {
    server.on('connect', (req: IncomingMessage, socket: Duplex) => {
      writeRawAnswer(socket, refuse(req, options));
    });
  }
}
