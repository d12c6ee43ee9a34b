import type { ErrorHandler } from 'hono';
import { SidecarError, asSidecarError, errorEnvelope, type ProxyErrorCode } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import type { ProxyEnv } from './proxy-env.js';

export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

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

/**
 * Hono `onError`: SidecarError → its status and envelope (+ `Retry-After`); anything else → 500.
 * The cause goes to the log only: it may name hosts, certificates or worse.
 */
export function createErrorHandler(options: ErrorHandlerOptions): ErrorHandler<ProxyEnv> {
  return (error, c) => {
    const requestId = c.get('requestId') ?? 'unknown';
    const code = errorCodeOf(error);
    options.metrics.proxyRejected.inc({ code });
    if (!(error instanceof SidecarError)) {
      options.logger.error({ err: error, requestId }, 'unexpected error in the proxy');
    } else if (error.cause !== undefined) {
      options.logger.warn({ err: error.cause, requestId, code }, error.message);
    }
    const answer = errorAnswer(error, requestId);
    return new Response(answer.body, { status: answer.status, headers: answer.headers });
  };
}
