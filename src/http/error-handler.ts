import type { ErrorHandler } from 'hono';
import type { ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import { SidecarError, asSidecarError, errorEnvelope, type ProxyErrorCode } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import type { ProxyEnv } from './proxy-env.js';

export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Answers after which the connection is closed: the rest of the request (an unread body) cannot
 * be parsed as the next request.
 */
const CLOSES_CONNECTION: ReadonlySet<ProxyErrorCode> = new Set(['request_timeout']);

/** The one mapping from an error to the HTTP answer the client sees (STYLE.md 4). */
export function errorAnswer(error: unknown, requestId: string): ErrorAnswer {
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'x-request-id': requestId,
  };
  const known = asSidecarError(error);
  if (known.retryAfterSeconds !== undefined)
    headers['retry-after'] = String(known.retryAfterSeconds);
  if (known.code === 'method_not_allowed')
    headers.allow = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';
  return { status: known.status, headers, body: JSON.stringify(errorEnvelope(known, requestId)) };
}

export function errorCodeOf(error: unknown): ProxyErrorCode {
  return asSidecarError(error).code;
}

export interface ErrorHandlerOptions {
  logger: Logger;
  metrics: Pick<SidecarMetrics, 'proxyRejected'>;
}

/** Count and log an error the sidecar answers itself; the cause goes to the log only. */
function record(error: unknown, requestId: string, options: ErrorHandlerOptions): ProxyErrorCode {
  const code = errorCodeOf(error);
  options.metrics.proxyRejected.inc({ code });
  if (!(error instanceof SidecarError)) {
    options.logger.error({ err: error, requestId }, 'unexpected error in the proxy');
  } else if (error.cause !== undefined) {
    options.logger.warn({ err: error.cause, requestId, code }, error.message);
  }
  return code;
}

/**
 * Write the envelope for `error` into a node response (the proxy listener's path). Returns the
 * status and code for the request log. If the response already started (never expected: the
 * forwarder only rejects before writing), it is destroyed instead.
 */
export function answerError(
  res: ServerResponse | Http2ServerResponse,
  error: unknown,
  requestId: string,
  options: ErrorHandlerOptions,
): { status: number; code: ProxyErrorCode } {
  const code = record(error, requestId, options);
  const answer = errorAnswer(error, requestId);
  if (res.headersSent || res.destroyed) {
    if (!res.destroyed) res.destroy();
    return { status: answer.status, code };
  }
  const headers: Record<string, string> = answer.headers;
  headers['content-length'] = String(Buffer.byteLength(answer.body));
  if (CLOSES_CONNECTION.has(code) && !('stream' in res)) headers.connection = 'close';
  res.writeHead(answer.status, headers);
  res.end(answer.body);
  return { status: answer.status, code };
}

/**
 * Hono `onError`: SidecarError → its status and envelope (+ `Retry-After`); anything else → 500.
 * The cause goes to the log only: it may name hosts, certificates or worse.
 */
export function createErrorHandler(options: ErrorHandlerOptions): ErrorHandler<ProxyEnv> {
  return (error, c) => {
    const requestId = c.get('requestId') ?? 'unknown';
    record(error, requestId, options);
    const answer = errorAnswer(error, requestId);
    return new Response(answer.body, { status: answer.status, headers: answer.headers });
  };
}
