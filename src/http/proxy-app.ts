import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { Hono } from 'hono';
import { systemClock, type Clock } from '../clock.js';
import { SidecarError } from '../errors.js';
import type { Forwarder } from '../proxy/forwarder.js';
import { checkRequestTarget } from '../proxy/path-safety.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { createErrorHandler } from './error-handler.js';
import type { ProxyEnv } from './proxy-env.js';
import { rawTargetOf } from './raw-target.js';
import { requestIdMiddleware } from './request-id.js';
import { requestLogMiddleware } from './request-log.js';

export interface ProxyAppOptions {
  /** Allowed path prefixes (`upstream.pathPrefixes`). */
  prefixes: readonly string[];
  forwarder: Forwarder;
  logger: Logger;
  metrics: Pick<SidecarMetrics, 'proxyRejected'>;
  /** True once shutdown began: new requests get 503 `shutting_down`. */
  isDraining: () => boolean;
  clock?: Pick<Clock, 'now'>;
  /** Request id generator; crypto.randomUUID by default. */
  generateRequestId?: () => string;
}

/** TRACE would echo the injected bearer back to the caller; CONNECT would make this a tunnel. */
const REFUSED_METHODS = new Set(['TRACE', 'CONNECT', 'TRACK']);

/**
 * The proxy listener's Hono app: request id, request log, path safety, method and drain checks,
 * then the forwarder writes the answer straight into the node response (perf/ENGINE.md).
 * Needs the node bindings of `@hono/node-server` (`c.env.incoming`/`c.env.outgoing`).
 */
export function createProxyApp(options: ProxyAppOptions): Hono<ProxyEnv> {
  const app = new Hono<ProxyEnv>();
  const clock = options.clock ?? systemClock;

  app.use(requestIdMiddleware(options.generateRequestId));
  app.use(requestLogMiddleware({ logger: options.logger, clock }));
  app.use(async (c, next) => {
    // Judged on the raw target: Hono's URL is already normalised (DESIGN.md "Proxy semantics").
    const verdict = checkRequestTarget(rawTargetOf(c.env.incoming), options.prefixes);
    if (!verdict.ok) throw new SidecarError(verdict.code, verdict.reason);
    if (REFUSED_METHODS.has((c.env.incoming.method ?? '').toUpperCase())) {
      throw new SidecarError('method_not_allowed', `${c.env.incoming.method} is not forwarded`);
    }
    if (options.isDraining()) {
      throw new SidecarError(
        'shutting_down',
        'the sidecar is shutting down; retry on another instance',
      );
    }
    await next();
  });
  app.all('*', async (c) => {
    const outcome = await options.forwarder.forward(c.env.incoming, c.env.outgoing, {
      requestId: c.get('requestId'),
    });
    c.set('outcome', outcome);
    return RESPONSE_ALREADY_SENT;
  });
  app.onError(createErrorHandler({ logger: options.logger, metrics: options.metrics }));
  return app;
}
