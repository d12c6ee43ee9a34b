import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';

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

/** Sets `c.var.requestId` and the response header; the forwarder sends the same id upstream. */
export function requestIdMiddleware(
  generate: () => string = randomUUID,
): MiddlewareHandler<{ Variables: { requestId: string } }> {
  return async (c, next) => {
    const requestId = resolveRequestId(c.req.header(REQUEST_ID_HEADER), generate);
    c.set('requestId', requestId);
    c.header(REQUEST_ID_HEADER, requestId);
    await next();
  };
}
