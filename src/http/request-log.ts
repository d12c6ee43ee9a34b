import type { MiddlewareHandler } from 'hono';
import type { Clock } from '../clock.js';
import type { ForwardOutcome } from '../proxy/forwarder.js';
import { pathForLog } from '../proxy/path-safety.js';
import type { Logger } from '../telemetry/logger.js';
import { rawTargetOf } from './raw-target.js';
import type { ProxyEnv } from './proxy-env.js';

export interface RequestLogOptions {
  logger: Logger;
  clock: Pick<Clock, 'now'>;
}

/**
 * One line per proxied request (DESIGN.md "Logs"). The path is logged without its query string:
 * queries may carry data the caller did not mean to log.
 */
export function requestLogMiddleware(options: RequestLogOptions): MiddlewareHandler<ProxyEnv> {
  return async (c, next) => {
    const started = options.clock.now();
    await next();
    const outcome: ForwardOutcome | undefined = c.get('outcome');
    const line = {
      requestId: c.get('requestId'),
      method: c.env.incoming.method,
      path: pathForLog(rawTargetOf(c.env.incoming)),
      status: outcome?.status ?? c.res.status,
      durationMs: options.clock.now() - started,
      upstreamStatus: outcome?.upstreamStatus,
      replayed: outcome?.replayed ?? false,
      ...(outcome && outcome.result !== 'complete' ? { result: outcome.result } : {}),
    };
    options.logger.info(line, 'request');
  };
}
