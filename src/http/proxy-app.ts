/**
 * The proxy listener's Hono app: it answers the requests the sidecar refuses before anything is
 * forwarded (unsafe target, path outside the prefixes, refused method, too many header fields,
 * two Hosts, draining, `proxy.maxInFlight` full) through its `onError`, the error handler every
 * refusal goes through. Forwarded requests do not pass through it: the node handler in front
 * (proxy-handler.ts) takes them straight to the forwarder, so the hot path runs no router,
 * no Context and no `Response` (docs/benchmarks.md "Hot path").
 */
import { getRequestListener, type Http2Bindings, type HttpBindings } from '@hono/node-server';
import { Hono } from 'hono';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { SidecarError, type ProxyErrorCode } from '../errors.js';
import { checkRequestTarget } from '../proxy/path-safety.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { createErrorHandler, errorCodeOf } from './error-handler.js';
import type { ProxyEnv } from './proxy-env.js';

export interface ProxyAppOptions {
  logger: Logger;
  metrics: Pick<SidecarMetrics, 'proxyRejected'>;
}

type NodeRequest = IncomingMessage | Http2ServerRequest;
type NodeResponse = ServerResponse | Http2ServerResponse;

/** Answers one refused request; resolves with what the request line records. */
export type RefusalAnswerer = (
  req: NodeRequest,
  res: NodeResponse,
  refusal: SidecarError,
  requestId: string,
) => Promise<{ status: number; code: ProxyErrorCode }>;

/**
 * Target the adapter is handed instead of an unsafe one (the adapter's URL parser would answer
 * some with a bare 400); the refusal was already judged on the raw target.
 */
const PLACEHOLDER_TARGET = '/';

/** The proxy listener's Hono app, as the one function the handler calls with a refusal. */
export function createProxyApp(options: ProxyAppOptions): RefusalAnswerer {
  const refusals = new WeakMap<object, { error: SidecarError; requestId: string }>();
  const app = new Hono<ProxyEnv>();
  app.all('*', (c) => {
    const refused = refusals.get(c.env.incoming);
    if (refused === undefined) throw new SidecarError('not_found', 'nothing is served here');
    c.set('requestId', refused.requestId);
    throw refused.error;
  });
  app.onError(createErrorHandler({ logger: options.logger, metrics: options.metrics }));
  const listener = getRequestListener((request: Request, env: HttpBindings | Http2Bindings) =>
    app.fetch(request, env),
  );

  const refuse: RefusalAnswerer = async (req, res, error, requestId) => {
    refusals.set(req, { error, requestId });
    if (!checkRequestTarget(req.url ?? '', ['/']).ok) req.url = PLACEHOLDER_TARGET;
    await listener(req, res);
    return { status: res.statusCode, code: errorCodeOf(error) };
  };
  return refuse;
}
