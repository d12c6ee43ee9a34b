/**
 * The forwarder: a function from a client request to the upstream's answer written into the
 * client response (STYLE.md 5). undici `stream()` writes the upstream body straight into the node
 * response with backpressure (perf/ENGINE.md); errors before the upstream's headers become
 * SidecarErrors for the one error handler, errors after them abort the client response.
 */
import type { ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import { Writable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import { SidecarError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { clientResponseHeaders, upstreamRequestHeaders } from './headers.js';
import {
  ClientGoneError,
  REPLAY_BUFFER_BYTES,
  prepareBody,
  upstreamBody,
  type ClientRequest,
  type PreparedBody,
} from './request-body.js';
import type { QuotaGuard } from './quota/guard.js';
import type { AccessTokenSource } from './types.js';

export type { ClientRequest } from './request-body.js';
export { createUpstreamDispatcher, type UpstreamDispatcherOptions } from './dispatcher.js';
export type ClientResponse = ServerResponse | Http2ServerResponse;

export type ForwarderMetrics = Pick<
  SidecarMetrics,
  'upstreamRequests' | 'upstreamRequestDuration' | 'upstreamUnauthorized' | 'requestsInFlight'
>;

export interface ForwarderOptions {
  /** Upstream base URL (`https://host[:port]`); a path in it is prepended to every request. */
  upstream: URL | string;
  dispatcher: Dispatcher;
  tokens: AccessTokenSource;
  /** Time to the upstream's response headers, connecting included; then 504 (DESIGN.md). */
  timeoutMs: number;
  metrics: ForwarderMetrics;
  logger: Logger;
  clock: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;
  /** Largest body buffered for a replay after a 401. Default 64 KiB. */
  replayBufferBytes?: number;
  /** The quota guard: admits each upstream request and watches each answer for a cooldown. */
  quota?: Pick<QuotaGuard, 'admit' | 'observe' | 'limited'>;
}

export interface ForwardContext {
  requestId: string;
}

/** How one proxied exchange ended, for the request log. */
export interface ForwardOutcome {
  /** Status written to the client; 499 when the client left before any answer (nothing sent). */
  status: number;
  /** Status of the upstream answer the client got (or last saw), if any arrived. */
  upstreamStatus: number | undefined;
  /** True when a 401 was answered by replaying the request with a renewed token. */
  replayed: boolean;
  /** `upstream_failed`/`client_closed`: the response was cut short after its headers. */
  result: 'complete' | 'client_closed' | 'upstream_failed';
}

export interface Forwarder {
  /**
   * Forward `req` upstream and stream the answer into `res`. Rejects with a SidecarError only
   * while nothing has been written to `res`; afterwards failures are logged and `res` destroyed.
   */
  forward(req: ClientRequest, res: ClientResponse, ctx: ForwardContext): Promise<ForwardOutcome>;
}

const METHOD_LABELS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Bounded label values: a client can send any method token. */
function methodLabel(method: string): string {
  return METHOD_LABELS.has(method) ? method : 'other';
}

/** Swallows the body of a 401 that is about to be replayed. */
function discard(): Writable {
  return new Writable({
    write(_chunk, _encoding, callback) {
      callback();
    },
  });
}

type Attempt =
  | { kind: 'answered'; upstreamStatus: number; replay: boolean }
  | { kind: 'cut'; upstreamStatus: number; result: 'client_closed' | 'upstream_failed' }
  | { kind: 'client_gone' };

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

const CLIENT_GONE: ForwardOutcome = {
  status: 499,
  upstreamStatus: undefined,
  replayed: false,
  result: 'client_closed',
};

/** False when the client left while waiting for a rate-limit slot. */
async function waitedForSlot(slot: Promise<void>): Promise<boolean> {
  try {
    await slot;
    return true;
  } catch (err) {
    if (err instanceof ClientGoneError) return false;
    throw err;
  }
}

export function createForwarder(options: ForwarderOptions): Forwarder {
  const upstream = new URL(options.upstream);
  const origin = upstream.origin;
  const basePath = upstream.pathname.replace(/\/+$/, '');
  const { dispatcher, tokens, timeoutMs, metrics, logger, clock } = options;
  const replayLimit = options.replayBufferBytes ?? REPLAY_BUFFER_BYTES;
  const quota = options.quota;

  /**
   * Quota admission before a request goes upstream (DESIGN.md "Quota guard"). Without a rate
   * limit it is synchronous (it throws during a cooldown); with one, a waiting request gives up
   * its place the moment its client leaves.
   */
  function admit(res: ClientResponse): Promise<void> | undefined {
    if (quota === undefined) return undefined;
    if (!quota.limited) return quota.admit();
    const controller = new AbortController();
    const onClose = () => controller.abort(new ClientGoneError());
    res.once('close', onClose);
    const wait = quota.admit(controller.signal);
    if (wait === undefined) {
      res.off('close', onClose);
      return undefined;
    }
    return wait.finally(() => res.off('close', onClose));
  }

  async function attempt(
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
    token: string,
    body: PreparedBody,
    mayReplay: boolean,
  ): Promise<Attempt> {
    const method = req.method ?? 'GET';
    const label = methodLabel(method);
    const controller = new AbortController();
    let abortedBy: 'timeout' | 'client' | undefined;
    let headersSeen = false;
    let upstreamStatus = 0;
    let wrote = false;
    let replay = false;
    const started = clock.now();

    const timer = clock.setTimeout(() => {
      abortedBy ??= 'timeout';
      controller.abort(
        new SidecarError('upstream_timeout', 'no upstream response headers in time'),
      );
    }, timeoutMs);
    const onClientClose = () => {
      if (res.writableFinished) return;
      abortedBy ??= 'client';
      controller.abort(new ClientGoneError());
    };
    res.once('close', onClientClose);

    const factory: Dispatcher.StreamFactory = ({ statusCode, headers }) => {
      clock.clearTimeout(timer);
      headersSeen = true;
      upstreamStatus = statusCode;
      quota?.observe(statusCode, headers);
      metrics.upstreamRequestDuration.observe({ method: label }, (clock.now() - started) / 1000);
      metrics.upstreamRequests.inc({ method: label, code: String(statusCode) });
      if (statusCode === 401) {
        // Always report the token: the keeper decides whether it is still current (DESIGN.md).
        const worthReplaying = tokens.invalidate(token);
        replay = mayReplay && worthReplaying;
        metrics.upstreamUnauthorized.inc({ replayed: String(replay) });
        if (replay) return discard();
      }
      res.writeHead(statusCode, clientResponseHeaders(headers, ctx.requestId));
      wrote = true;
      return res;
    };

    try {
      await dispatcher.stream(
        {
          origin,
          path: basePath + (req.url ?? '/'),
          method: method,
          headers: upstreamRequestHeaders(req.rawHeaders, {
            host: upstream.host,
            accessToken: token,
            requestId: ctx.requestId,
          }),
          body: upstreamBody(req, body),
          signal: controller.signal,
          headersTimeout: timeoutMs,
        },
        factory,
      );
      return { kind: 'answered', upstreamStatus, replay };
    } catch (err) {
      if (!headersSeen) metrics.upstreamRequests.inc({ method: label, code: 'error' });
      if (replay && !wrote) {
        // The discarded 401 body failed to arrive in full; the replay does not need it.
        return { kind: 'answered', upstreamStatus, replay };
      }
      if (wrote) {
        const result = abortedBy === 'client' ? 'client_closed' : 'upstream_failed';
        if (result === 'upstream_failed') {
          logger.warn(
            { err, requestId: ctx.requestId },
            'upstream failed after response headers; client response aborted',
          );
        }
        if (!res.destroyed) res.destroy();
        return { kind: 'cut', upstreamStatus, result };
      }
      if (abortedBy === 'client' || err instanceof ClientGoneError) return { kind: 'client_gone' };
      if (abortedBy === 'timeout' || errorCode(err) === 'UND_ERR_HEADERS_TIMEOUT') {
        throw new SidecarError(
          'upstream_timeout',
          `no response headers from the upstream within ${timeoutMs} ms`,
          {
            cause: err,
          },
        );
      }
      throw new SidecarError('upstream_unreachable', 'the upstream could not be reached', {
        cause: err,
      });
    } finally {
      clock.clearTimeout(timer);
      res.off('close', onClientClose);
    }
  }

  /** The token source promises SidecarErrors; anything else it throws still means "no token". */
  async function accessToken(): Promise<string> {
    try {
      return await tokens.getAccessToken();
    } catch (err) {
      if (err instanceof SidecarError) throw err;
      throw new SidecarError('token_unavailable', 'no access token is available', {
        cause: err,
        retryAfterSeconds: 1,
      });
    }
  }

  async function forward(
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
  ): Promise<ForwardOutcome> {
    metrics.requestsInFlight.inc();
    try {
      // Waiting for a slot happens inside the in-flight count (DESIGN.md "Quota guard").
      const slot = admit(res);
      if (slot !== undefined && !(await waitedForSlot(slot))) return CLIENT_GONE;
      const token = await accessToken();
      let body: PreparedBody;
      try {
        body = await prepareBody(req, replayLimit);
      } catch (err) {
        if (err instanceof ClientGoneError) {
          return {
            status: 499,
            upstreamStatus: undefined,
            replayed: false,
            result: 'client_closed',
          };
        }
        throw err;
      }
      const replayable = body.kind !== 'stream';
      let outcome = await attempt(req, res, ctx, token, body, replayable);
      let replayed = false;
      if (outcome.kind === 'answered' && outcome.replay) {
        replayed = true;
        // The replay is a second upstream request: it needs its own slot under the limit.
        const again = admit(res);
        if (again !== undefined && !(await waitedForSlot(again))) return CLIENT_GONE;
        const fresh = await accessToken();
        outcome = await attempt(req, res, ctx, fresh, body, false);
      }
      switch (outcome.kind) {
        case 'answered':
          return {
            status: outcome.upstreamStatus,
            upstreamStatus: outcome.upstreamStatus,
            replayed,
            result: 'complete',
          };
        case 'cut':
          return {
            status: outcome.upstreamStatus,
            upstreamStatus: outcome.upstreamStatus,
            replayed,
            result: outcome.result,
          };
        case 'client_gone':
          return { status: 499, upstreamStatus: undefined, replayed, result: 'client_closed' };
      }
    } finally {
      metrics.requestsInFlight.dec();
    }
  }

  return { forward };
}
