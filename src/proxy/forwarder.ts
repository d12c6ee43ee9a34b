/**
 * The forwarder: a function from a client request to the upstream's answer written into the
 * client response (docs/design.md "Practices" 5). undici `stream()` writes the upstream body straight into the node
 * response with backpressure (docs/engine-choice.md); errors before the upstream's headers become
 * SidecarErrors for the one error handler, errors after them abort the client response.
 *
 * The path of one request, in order:
 *   1. stages' `beforeUpstream` (quota guard, response cache)      — STAGE HOOK 1
 *   2. the access token (may wait up to `token.waitMs`)
 *   3. the request body: none, buffered (replayable) or streamed  — `proxy.bodyTimeoutMs`
 *   4. the upstream exchange                                       — `upstream.timeoutMs`, `upstream.bodyTimeoutMs`
 *   5. stages' `upstreamAnswered` on the answer head               — STAGE HOOK 2
 *   6. a 401 on a still-current token: replay once (docs/design.md "Token keeper")
 * Between the steps a client that left (h2 reset, closed socket) stops the request at once.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import { overloadedError, SidecarError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { ExpiryQueue } from './expiry-queue.js';
import { createInFlightLimit } from './admission.js';
import {
  AnswerHead,
  clientResponseHeaders,
  rawClientResponseHeaders,
  upstreamRequestHeaders,
} from './headers.js';
import {
  CLIENT_GONE,
  closesWithClient,
  keepAliveOf,
  type ClientResponse,
  type ForwardOutcome,
} from './outcome.js';
import {
  ClientGoneError,
  NO_BODY,
  REPLAY_BUFFER_BYTES,
  hasNoBody,
  holdWhileBodyArrives,
  prepareBody,
  requestTimeoutError,
  upstreamBody,
  type BodyTimeout,
  type ClientRequest,
  type PreparedBody,
} from './request-body.js';
import type { BodyTap, Exchange, ForwardStage } from './stages.js';
import {
  UpstreamCall,
  type Attempt,
  type HeadDecision,
  type UpstreamCallHooks,
  type UpstreamCallState,
} from './upstream-call.js';
import type { AccessTokenSource } from './types.js';

export type { ClientRequest } from './request-body.js';
export type { ClientResponse, ForwardOutcome } from './outcome.js';
export { CLIENT_GONE } from './outcome.js';
export type { BodyTap, Exchange, ForwardStage } from './stages.js';

export type ForwarderMetrics = Pick<
  SidecarMetrics,
  'upstreamRequests' | 'upstreamRequestDuration' | 'upstreamUnauthorized'
>;

export interface ForwarderOptions {
  /** Upstream base URL (`https://host[:port]`); a path in it is prepended to every request. */
  upstream: URL | string;
  /** The upstream pool (`upstream.maxConnections` per origin, dispatcher.ts). */
  dispatcher: Dispatcher;
  tokens: AccessTokenSource;
  /** Time to the upstream's response headers, waiting for a connection included; then 504. */
  timeoutMs: number;
  /** `upstream.bodyTimeoutMs`: longest pause inside the upstream's answer body; then the client response is aborted. */
  upstreamBodyTimeoutMs?: number;
  /** `proxy.bodyTimeoutMs`: longest pause inside the client's request body; then 408. */
  clientBodyTimeoutMs?: number;
  /** `proxy.minBodyBytesPerSecond`: slowest average body after its first 10 s; then 408. Default 0 (off). */
  minBodyBytesPerSecond?: number;
  /**
   * Bodies streamed upstream as they arrive (larger than the replay buffer) at once: each holds an
   * upstream connection while it trickles, so at most half of `upstream.maxConnections`; beyond it
   * 503 `overloaded`. Default: unbounded.
   */
  maxBodiesStreaming?: number;
  metrics: ForwarderMetrics;
  logger: Logger;
  clock: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;
  /** Largest body buffered for a replay after a 401. Default 64 KiB. */
  replayBufferBytes?: number;
  /** Features on the request path (quota guard, response cache): see stages.ts. Default none. */
  stages?: readonly ForwardStage[];
}

export interface ForwardContext {
  requestId: string;
  /**
   * Called with an upstream request that undici still holds after the forward ended (it was
   * answered 504 while it waited for a connection): the caller keeps the request counted against
   * `proxy.maxInFlight` until `until` settles, so dropped requests waiting in the pool stay
   * bounded too. Not called for a request whose client left: its slot is given back at once.
   */
  hold?(until: Promise<void>): void;
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

/** RFC 9110 §6.4.1: 204 and 304 answers never carry content (nor does any answer to HEAD). */
function bodiless(status: number, method: string): boolean {
  return status === 204 || status === 304 || method === 'HEAD';
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

const NO_TAPS: BodyTap[] = [];

/** Longest an answer is read and dropped after its client left, before its connection is given up. */
export const CLIENT_GONE_DRAIN_MS = 1_000;
const GONE_ATTEMPT: Attempt = Object.freeze({ kind: 'client_gone' });

/** The forwarder's outcome of the last attempt. */
function outcomeOf(attempt: Attempt, replayed: boolean): ForwardOutcome {
  switch (attempt.kind) {
    case 'answered':
      return {
        status: attempt.upstreamStatus,
        upstreamStatus: attempt.upstreamStatus,
        replayed,
        result: 'complete',
      };
    case 'cut':
      return {
        status: attempt.upstreamStatus,
        upstreamStatus: attempt.upstreamStatus,
        replayed,
        result: attempt.result,
      };
    case 'client_gone':
      return replayed ? { ...CLIENT_GONE, replayed } : CLIENT_GONE;
  }
}

/**
 * The client's headers come from the raw list unless a stage parsed (and may have added to) the
 * object, the client is on h2 (its compat API wants the object), or a header was already set on
 * the response (the drain's `Connection: close`): node 20's `writeHead` then stores the flat list
 * with `setHeader`, and of a repeated field (Set-Cookie) only the last line would survive.
 */
function objectHeadersFor(res: ClientResponse, head: AnswerHead): boolean {
  return head.parsed || isHttp2Response(res) || res.getHeaderNames().length > 0;
}

/** One proxied exchange as the stages see it (a class: no closure per request). */
class StageExchange implements Exchange {
  readonly method: string;
  readonly target: string;
  constructor(
    readonly req: ClientRequest,
    readonly res: ClientResponse,
    readonly requestId: string,
  ) {
    this.method = req.method ?? 'GET';
    this.target = req.url ?? '/';
  }

  clientGone(): boolean {
    return clientGone(this.req, this.res);
  }
}

function isHttp2Response(res: ClientResponse): boolean {
  return 'stream' in res;
}

/**
 * Resolves as `pending` does, or with undefined as soon as the client resets its stream or closes
 * its connection (a listener only on this slow path: the common path awaits nothing).
 */
function unlessClientGone<T>(pending: Promise<T>, res: ClientResponse): Promise<T | undefined> {
  const client = closesWithClient(res);
  if (client.destroyed) {
    pending.catch(() => undefined);
    return Promise.resolve(undefined);
  }
  return new Promise<T | undefined>((resolve, reject) => {
    const gone = (): void => resolve(undefined);
    client.once('close', gone);
    pending.then(
      (value) => {
        client.off('close', gone);
        resolve(value);
      },
      (err: unknown) => {
        client.off('close', gone);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/**
 * True once the client reset its stream or closed its connection. Checked after every wait: a
 * `close` that fired while the forwarder awaited the token or a stage has no listener to see it.
 */
export function clientGone(req: ClientRequest, res: ClientResponse): boolean {
  return closesWithClient(res).destroyed || (!isHttp2Response(res) && req.socket.destroyed);
}

export function createForwarder(options: ForwarderOptions): Forwarder {
  const upstream = new URL(options.upstream);
  const origin = upstream.origin;
  const basePath = upstream.pathname.replace(/\/+$/, '');
  const { dispatcher, tokens, timeoutMs, metrics, logger, clock } = options;
  const replayLimit = options.replayBufferBytes ?? REPLAY_BUFFER_BYTES;
  const upstreamBodyTimeoutMs = options.upstreamBodyTimeoutMs ?? 30_000;
  const bodyTimeout: BodyTimeout = {
    ms: options.clientBodyTimeoutMs ?? 30_000,
    minBytesPerSecond: options.minBodyBytesPerSecond ?? 0,
    clock,
  };
  const streamSlots = createInFlightLimit(options.maxBodiesStreaming ?? Number.POSITIVE_INFINITY);
  const stages = options.stages ?? [];
  // prom-client hashes the label object on every call; the children are looked up once per
  // (method, status) instead (bounded: 8 method labels × the status codes seen).
  const durationOf = new Map<string, { observe(value: number): void }>();
  const countOf = new Map<string, Map<number | 'error', { inc(): void }>>();
  const observeDuration = (method: string, seconds: number) => {
    let child = durationOf.get(method);
    if (child === undefined) {
      child = metrics.upstreamRequestDuration.labels({ method });
      durationOf.set(method, child);
    }
    child.observe(seconds);
  };
  const countRequest = (method: string, code: number | 'error') => {
    let byCode = countOf.get(method);
    if (byCode === undefined) {
      byCode = new Map();
      countOf.set(method, byCode);
    }
    let child = byCode.get(code);
    if (child === undefined) {
      child = metrics.upstreamRequests.child({ method, code: String(code) });
      byCode.set(code, child);
    }
    child.inc();
  };
  const before = stages.filter((s) => s.beforeUpstream !== undefined);
  const answered = stages.filter((s) => s.upstreamAnswered !== undefined);

  /** What the shared hooks need to know about one upstream call. */
  interface CallInfo {
    readonly ctx: ForwardContext;
    readonly exchange: Exchange | undefined;
    readonly method: string;
    readonly label: string;
    readonly started: number;
    readonly token: string;
    readonly mayReplay: boolean;
  }

  function tapsFor(exchange: Exchange, status: number, head: AnswerHead): BodyTap[] {
    let taps: BodyTap[] | undefined;
    for (const stage of answered) {
      const tap = stage.upstreamAnswered?.(exchange, status, head);
      if (tap !== undefined) (taps ??= []).push(tap);
    }
    return taps ?? NO_TAPS;
  }

  // undici's headersTimeout starts once the request is written; this deadline also covers the
  // wait for a free connection under `upstream.maxConnections` (docs/configuration.md: time to
  // response headers). One queue and one timer for every call (expiry-queue.ts).
  const headDeadlines = new ExpiryQueue<UpstreamCall<CallInfo>>(clock, timeoutMs, (call) =>
    call.abort(
      'timeout',
      new SidecarError('upstream_timeout', 'no upstream response headers in time'),
    ),
  );

  // A client that left after its request was written: its answer is read and dropped to keep the
  // connection, for at most CLIENT_GONE_DRAIN_MS; then the connection is given up. Unbounded, an h2
  // reset storm on a slow path held every upstream connection for the path's whole time, and every
  // request behind them waited (issue 22). One queue and one timer for every call, as above.
  const drainDeadlines = new ExpiryQueue<UpstreamCall<CallInfo>>(
    clock,
    CLIENT_GONE_DRAIN_MS,
    (call) => call.stopDraining(),
  );

  // One set of hooks for every call: the per-request state is the call's `info`.
  const hooks: UpstreamCallHooks<CallInfo> = {
    onHead(call, statusCode, rawHeaders): HeadDecision {
      headDeadlines.remove(call);
      const info = call.info;
      observeDuration(info.label, (clock.now() - info.started) / 1000);
      countRequest(info.label, statusCode);
      if (statusCode === 401) {
        // Always report the token: the keeper decides whether it is still current (docs/design.md "Token keeper").
        const verdict = tokens.invalidate(info.token);
        const replay = info.mayReplay && verdict !== 'keep';
        metrics.upstreamUnauthorized.inc({ replayed: String(replay) });
        if (replay) return { replay: true, bodiless: true, taps: NO_TAPS };
      }
      const head = new AnswerHead(rawHeaders);
      // STAGE HOOK 2: the answer head, before the client sees it.
      const taps = info.exchange === undefined ? NO_TAPS : tapsFor(info.exchange, statusCode, head);
      const requestId = info.ctx.requestId;
      const keepAlive = keepAliveOf(call.res);
      let headers: OutgoingHttpHeaders | string[];
      if (objectHeadersFor(call.res, head)) {
        headers = clientResponseHeaders(head.headers, requestId, statusCode);
        if (keepAlive !== undefined) headers['keep-alive'] = keepAlive;
      } else {
        headers = rawClientResponseHeaders(rawHeaders, requestId, statusCode);
        if (keepAlive !== undefined) headers.push('keep-alive', keepAlive);
      }
      return { replay: false, taps, headers, bodiless: bodiless(statusCode, info.method) };
    },
    onError: (call, err) => classify(err, call, call.info.method, call.info.label, call.info.ctx),
    onSettled(call) {
      headDeadlines.remove(call);
      // A request undici still holds after a 504 stays counted by the caller until undici lets go
      // of it. One whose client left gives its slot back at once (docs/design.md "Bounded work"):
      // undici drops it without a write the moment a connection takes it, and connections are
      // never held longer than CLIENT_GONE_DRAIN_MS for a client that left.
      if (!call.isReleased && call.abortedBy !== 'client') call.info.ctx.hold?.(call.released);
    },
    onDraining(call) {
      drainDeadlines.add(call);
    },
  };

  /** One upstream exchange. Not async: on the common path nothing is awaited before dispatch. */
  function attempt(
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
    exchange: Exchange | undefined,
    token: string,
    body: PreparedBody,
    mayReplay: boolean,
  ): Promise<Attempt> {
    if (clientGone(req, res)) return Promise.resolve(GONE_ATTEMPT);
    const method = req.method ?? 'GET';
    const call = new UpstreamCall<CallInfo>(res, hooks, body.kind !== 'stream', {
      ctx,
      exchange,
      method,
      label: methodLabel(method),
      started: clock.now(),
      token,
      mayReplay,
    });
    headDeadlines.add(call);
    try {
      dispatcher.dispatch(
        {
          origin,
          path: basePath + (req.url ?? '/'),
          method,
          headers: upstreamRequestHeaders(req.rawHeaders, {
            host: upstream.host,
            accessToken: token,
            requestId: ctx.requestId,
          }),
          body:
            body.kind === 'none'
              ? null
              : upstreamBody(req, body, bodyTimeout, () => {
                  call.abortedBy ??= 'client_body';
                }),
          headersTimeout: timeoutMs,
          bodyTimeout: upstreamBodyTimeoutMs,
        },
        call,
      );
    } catch (err) {
      call.dispatchFailed(err instanceof Error ? err : new Error(String(err)));
    }
    return call.done;
  }

  /** How a failed or aborted exchange ends: an outcome once the client saw a head, else an error. */
  function classify(
    err: Error,
    state: UpstreamCallState,
    method: string,
    label: string,
    ctx: ForwardContext,
  ): Attempt | Error {
    const { abortedBy, upstreamStatus, replay } = state;
    if (!state.headersSeen) countRequest(label, 'error');
    if (replay && !state.wrote) {
      // The discarded 401 body failed to arrive in full; the replay does not need it.
      return { kind: 'answered', upstreamStatus, replay };
    }
    if (state.wrote) {
      if (bodiless(upstreamStatus, method) && state.clientEnded) {
        // The answer was complete at its head; only the upstream's extra bytes failed.
        return { kind: 'answered', upstreamStatus, replay };
      }
      const result = abortedBy === 'client' ? 'client_closed' : 'upstream_failed';
      if (result === 'upstream_failed') {
        logger.warn(
          { err, requestId: ctx.requestId },
          'upstream failed after response headers; client response aborted',
        );
      }
      return { kind: 'cut', upstreamStatus, result };
    }
    if (abortedBy === 'client' || err instanceof ClientGoneError) return GONE_ATTEMPT;
    if (abortedBy === 'client_body')
      return err instanceof SidecarError ? err : requestTimeoutError(bodyTimeout.ms);
    if (abortedBy === 'timeout' || errorCode(err) === 'UND_ERR_HEADERS_TIMEOUT') {
      return new SidecarError(
        'upstream_timeout',
        `no response headers from the upstream within ${timeoutMs} ms`,
        { cause: err },
      );
    }
    return new SidecarError('upstream_unreachable', 'the upstream could not be reached', {
      cause: err,
    });
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

  async function readBody(req: ClientRequest): Promise<PreparedBody | undefined> {
    if (hasNoBody(req)) return NO_BODY;
    try {
      const body = await prepareBody(req, replayLimit, bodyTimeout);
      // A body streamed upstream holds a pool connection while it arrives.
      if (body.kind === 'stream' && holdWhileBodyArrives(req, streamSlots) === undefined) {
        throw overloadedError(
          `${streamSlots.max} requests are already streaming their bodies; retry shortly`,
        );
      }
      return body;
    } catch (err) {
      if (err instanceof ClientGoneError) return undefined;
      throw err;
    }
  }

  /**
   * Steps 2–6. The common case (a token held now, no request body) dispatches without awaiting
   * anything: no promise per step (docs/benchmarks.md "Hot path").
   */
  function forwardUpstream(
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
    exchange: Exchange | undefined,
  ): Promise<ForwardOutcome> {
    const token = tokens.currentToken?.();
    if (token === undefined || !hasNoBody(req)) return forwardWaiting(req, res, ctx, exchange);
    if (clientGone(req, res)) return Promise.resolve(CLIENT_GONE);
    return attempt(req, res, ctx, exchange, token, NO_BODY, true).then((first) =>
      afterFirst(first, req, res, ctx, exchange, NO_BODY),
    );
  }

  /** Steps 2–6 when the token or the request body must be waited for. */
  async function forwardWaiting(
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
    exchange: Exchange | undefined,
  ): Promise<ForwardOutcome> {
    let token = tokens.currentToken?.();
    if (token === undefined) {
      // The wait for a token (up to `token.waitMs`) ends when the client leaves: its slot is
      // given back at once, not when the token comes.
      token = await unlessClientGone(accessToken(), res);
      if (token === undefined || clientGone(req, res)) return CLIENT_GONE;
    }
    const body = await readBody(req);
    if (body === undefined) return CLIENT_GONE;
    // A client gone since (an h2 reset after the proxy handler's wait for one) is caught at the
    // start of `attempt`: nothing is sent.
    const first = await attempt(req, res, ctx, exchange, token, body, body.kind !== 'stream');
    return afterFirst(first, req, res, ctx, exchange, body);
  }

  /** The first attempt's outcome, or step 6 when it met a 401 to replay. */
  function afterFirst(
    first: Attempt,
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
    exchange: Exchange | undefined,
    body: PreparedBody,
  ): ForwardOutcome | Promise<ForwardOutcome> {
    return first.kind === 'answered' && first.replay
      ? replayOnce(req, res, ctx, exchange, body)
      : outcomeOf(first, false);
  }

  /** Step 6: the 401 was for a token the keeper has since replaced or dropped; once more. */
  async function replayOnce(
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
    exchange: Exchange | undefined,
    body: PreparedBody,
  ): Promise<ForwardOutcome> {
    const fresh = await accessToken();
    return outcomeOf(await attempt(req, res, ctx, exchange, fresh, body, false), true);
  }

  /** STAGE HOOK 1 from stage `index` on, once a stage had to be awaited. */
  async function afterStage(
    pending: Promise<ForwardOutcome | undefined>,
    index: number,
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
    exchange: Exchange,
  ): Promise<ForwardOutcome> {
    let served = await pending;
    for (let i = index + 1; ; i += 1) {
      if (served !== undefined) return served;
      if (exchange.clientGone()) return CLIENT_GONE;
      const stage = before[i];
      if (stage === undefined) break;
      const result = stage.beforeUpstream?.(exchange);
      served = result instanceof Promise ? await result : result;
    }
    return forwardUpstream(req, res, ctx, exchange);
  }

  function forward(
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
  ): Promise<ForwardOutcome> {
    try {
      if (stages.length === 0) return forwardUpstream(req, res, ctx, undefined);
      const exchange = new StageExchange(req, res, ctx.requestId);
      // STAGE HOOK 1: each stage may wait, refuse (throw) or answer the client itself. A stage that
      // answers synchronously (no limit, no cache rule for the path) costs no await.
      for (let i = 0; i < before.length; i += 1) {
        const result = before[i]?.beforeUpstream?.(exchange);
        if (result instanceof Promise) return afterStage(result, i, req, res, ctx, exchange);
        if (result !== undefined) return Promise.resolve(result);
        if (exchange.clientGone()) return Promise.resolve(CLIENT_GONE);
      }
      return forwardUpstream(req, res, ctx, exchange);
    } catch (err) {
      // A stage that refuses throws: the caller sees a rejection, as from the rest of the path.
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  return { forward };
}
