import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { ProxyEnv } from './proxy-env.js';

/** DESIGN.md: an inbound id is kept only if it is 1–128 characters of `[A-Za-z0-9._-]`. */
const VALID_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export const REQUEST_ID_HEADER = 'x-request-id';

/** The inbound id when it is acceptable (a header repeated is a comma list, so it is refused), else a new one. */
export function resolveRequestId(
  inbound: string | string[] | undefined,
  generate: () => string = randomUUID,
): string {
  return typeof inbound === 'string' && VALID_REQUEST_ID.test(inbound) ? inbound : generate();
}

/**
 * Sets `c.var.requestId`; the forwarder sends it upstream and returns it, the error handler echoes
 * it. Read from the node request: `c.req.header()` would build a WHATWG Headers object per request
 * (perf/ENGINE.md: that costs ~40 % of throughput).
 */
export function requestIdMiddleware(
  generate: () => string = randomUUID,
): MiddlewareHandler<ProxyEnv> {
  return async (c, next) => {
    c.set('requestId', resolveRequestId(c.env.incoming.headers[REQUEST_ID_HEADER], generate));
    await next();
  };
}
