import type { ErrorHandler } from 'hono';
import { SidecarError, errorEnvelope } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import type { ProxyEnv } from './proxy-env.js';

/**
 * Code for errors the sidecar did not anticipate (a bug). Not in errors.ts's table yet; every
 * anticipated failure is a SidecarError, so this never describes an upstream or token problem.
 */
export const INTERNAL_ERROR_CODE = 'internal_error';

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
  if (error instanceof SidecarError) {
    if (error.retryAfterSeconds !== undefined)
      headers['retry-after'] = String(error.retryAfterSeconds);
    if (error.code === 'method_not_allowed')
      headers.allow = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';
    return { status: error.status, headers, body: JSON.stringify(errorEnvelope(error, requestId)) };
  }
  const body = {
    errors: [{ code: INTERNAL_ERROR_CODE, detail: 'internal error in the sidecar' }],
    requestId,
  };
  return { status: 500, headers, body: JSON.stringify(body) };
}

export function errorCodeOf(error: unknown): string {
  return error instanceof SidecarError ? error.code : INTERNAL_ERROR_CODE;
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
