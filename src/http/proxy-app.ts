import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { Hono } from 'hono';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { createErrorHandler } from './error-handler.js';
import type { ProxyHandler } from './proxy-handler.js';
import type { ProxyEnv } from './proxy-env.js';

export interface ProxyAppOptions {
  handler: ProxyHandler;
  logger: Logger;
  metrics: Pick<SidecarMetrics, 'proxyRejected'>;
}

/**
 * The proxy listener's Hono app: one route, no middleware chain. The handler (proxy-handler.ts)
 * does every check and writes the answer straight into the node response (perf/ENGINE.md); a
 * middleware per concern cost a promise hop and a closure each per request (docs/benchmarks.md).
 * Needs the node bindings of `@hono/node-server` (`c.env.incoming`/`c.env.outgoing`).
 */
export function createProxyApp(options: ProxyAppOptions): Hono<ProxyEnv> {
  const app = new Hono<ProxyEnv>();
  const { handler } = options;
  app.all('*', async (c) => {
    await handler(c.env.incoming, c.env.outgoing);
    return RESPONSE_ALREADY_SENT;
  });
  app.onError(createErrorHandler({ logger: options.logger, metrics: options.metrics }));
  return app;
}
