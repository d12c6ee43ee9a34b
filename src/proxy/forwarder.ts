/**
 * The forwarder: a client request's exchange to the upstream's answer written into the client
 * response (docs/design.md "Proxy"). Errors before the upstream's headers become SidecarErrors for
 * the one error-answer module; errors after them abort the client response.
 *
 * The path of one request, in order:
 *   1. stages' `beforeUpstream` (response cache, quota guard)      — STAGE HOOK 1
 *   2. the access token (may wait up to `token.waitMs`)
 *   3. the request body: none, buffered (replayable) or streamed  — `proxy.bodyTimeoutMs`
 *   4. the upstream exchange                                       — `upstream.timeoutMs`, `upstream.bodyTimeoutMs`
 *   5. stages' `upstreamAnswered` on the answer head               — STAGE HOOK 2
 *   6. a 401 on a still-current token: replay once (docs/design.md "Token keeper")
 * Between the steps a client that left (h2 reset, closed socket) stops the request at once.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import { overloadedError, SidecarError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import { createInFlightLimit, type InFlightLimit } from './admission.js';
import { AttemptFailures, bodiless } from './attempt-failures.js';
import { GONE_ATTEMPT, outcomeOf, type Attempt } from './attempt-outcome.js';
import type { Exchange } from './exchange.js';
import { clientResponseHeaders, upstreamRequestHeaders } from './headers.js';
import { CLIENT_GONE, unlessClientGone, type ForwardOutcome } from './outcome.js';
import {
  ClientGoneError,
  NO_BODY,
  REPLAY_BUFFER_BYTES,
  hasNoBody,
  holdWhileBodyArrives,
  prepareBody,
  upstreamBody,
  type BodyTimeout,
  type ClientRequest,
  type PreparedBody,
} from './request-body.js';
import type { ForwardStage } from './stages.js';
import { NO_TAPS, StageRunner } from './stage-runner.js';
import type { SlowReaders } from './slow-readers.js';
import type { AccessTokenSource } from './types.js';
import { UpstreamCall } from './upstream-call.js';
import type { CallView, HeadDecision, UpstreamCallHooks } from './upstream-hooks.js';
import { UpstreamMetrics, methodLabel, type ForwarderMetrics } from './upstream-metrics.js';

export type { ClientRequest } from './request-body.js';
export type { ClientResponse, ForwardOutcome } from './outcome.js';
export { CLIENT_GONE } from './outcome.js';
export type { BodyTap, ForwardStage } from './stages.js';
export { Exchange } from './exchange.js';
export type { ForwarderMetrics } from './upstream-metrics.js';

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
  /** Bodies streamed upstream at once (each holds a connection while it trickles); then 503. */
  maxBodiesStreaming?: number;
  metrics: ForwarderMetrics;
  logger: Logger;
  clock: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;
  /** Largest body buffered for a replay after a 401. Default 64 KiB. */
  replayBufferBytes?: number;
  /** Features on the request path (quota guard, response cache): see stages.ts. Default none. */
  stages?: readonly ForwardStage[];
  readers?: SlowReaders; // requests whose client is not reading (slow-readers.ts)
}

/** Longest an answer is read and dropped after its client left, before its connection is given up. */
export const CLIENT_GONE_DRAIN_MS = 1_000;

export class Forwarder {
  readonly #origin: string;
  readonly #host: string;
  readonly #basePath: string;
  readonly #dispatcher: Dispatcher;
  readonly #tokens: AccessTokenSource;
  readonly #timeoutMs: number;
  readonly #upstreamBodyTimeoutMs: number;
  readonly #replayLimit: number;
  readonly #bodyTimeout: BodyTimeout;
  readonly #streamSlots: InFlightLimit;
  readonly #clock: ForwarderOptions['clock'];
  readonly #metrics: UpstreamMetrics;
  readonly #failures: AttemptFailures;
  /** Undefined without stages: nothing of theirs runs per request. */
  readonly #stages: StageRunner | undefined;
  // undici's headersTimeout starts once the request is written; this deadline also covers the
  // wait for a free connection (docs/configuration.md: time to response headers): a node timer per
  // call, unref'd. A client that left after its request was written: its answer is read and
  // dropped to keep the connection, for at most CLIENT_GONE_DRAIN_MS (docs/design.md "Bounded work").
  /** One set of hooks for every call: the per-request state is the call's exchange. */
  readonly #hooks: UpstreamCallHooks<Exchange>;

  constructor(options: ForwarderOptions) {
    const upstream = new URL(options.upstream);
    this.#origin = upstream.origin;
    this.#host = upstream.host;
    this.#basePath = upstream.pathname.replace(/\/+$/, '');
    this.#dispatcher = options.dispatcher;
    this.#tokens = options.tokens;
    this.#timeoutMs = options.timeoutMs;
    this.#upstreamBodyTimeoutMs = options.upstreamBodyTimeoutMs ?? 30_000;
    this.#replayLimit = options.replayBufferBytes ?? REPLAY_BUFFER_BYTES;
    this.#bodyTimeout = {
      ms: options.clientBodyTimeoutMs ?? 30_000,
      minBytesPerSecond: options.minBodyBytesPerSecond ?? 0,
      clock: options.clock,
    };
    this.#streamSlots = createInFlightLimit(options.maxBodiesStreaming ?? Number.POSITIVE_INFINITY);
    this.#clock = options.clock;
    this.#metrics = new UpstreamMetrics(options.metrics);
    this.#failures = new AttemptFailures({
      metrics: this.#metrics,
      logger: options.logger,
      clock: options.clock,
      timeoutMs: this.#timeoutMs,
      clientBodyTimeoutMs: this.#bodyTimeout.ms,
    });
    const stages = options.stages ?? [];
    this.#stages =
      stages.length === 0
        ? undefined
        : new StageRunner(stages, (exchange) => this.#forwardUpstream(exchange));
    this.#hooks = {
      onHead: (call, status, rawHeaders) => this.#onHead(call, status, rawHeaders),
      onError: (call, err) => this.#failures.classify(err, call, call.info),
      onSettled: (call) => {
        this.#clearHeadDeadline(call);
        // A request undici still holds after a 504 stays counted until undici lets go of it; one
        // whose client left gives its slot back at once (docs/design.md "Bounded work").
        if (!call.isReleased && call.abortedBy !== 'client') call.info.hold(call.released);
      },
      onDraining: (call) => {
        this.#clock.setTimeout(() => call.stopDraining(), CLIENT_GONE_DRAIN_MS).unref?.();
      },
      readers: options.readers,
    };
    for (const stage of stages) stage.attach?.((exchange) => this.forward(exchange));
  }

  /**
   * Forward the exchange upstream and stream the answer into its response. Rejects with a
   * SidecarError only while nothing has been written; afterwards failures are logged and the
   * response destroyed.
   */
  forward(exchange: Exchange): Promise<ForwardOutcome> {
    // STAGE HOOK 1 (stage-runner.ts), then steps 2–6.
    if (this.#stages !== undefined) return this.#stages.run(exchange);
    try {
      return this.#forwardUpstream(exchange);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * Steps 2–6. A token held now and no request body: dispatched without awaiting anything, no
   * promise per step (docs/benchmarks.md "Hot path"); otherwise the waits come first.
   */
  #forwardUpstream(exchange: Exchange): Promise<ForwardOutcome> {
    const token = this.#tokens.currentToken?.();
    if (token === undefined || !hasNoBody(exchange.req)) return this.#forwardWaiting(exchange);
    if (exchange.clientGone()) return Promise.resolve(CLIENT_GONE);
    return this.#attempt(exchange, token, NO_BODY, true).then((first) =>
      this.#afterFirst(first, exchange, NO_BODY),
    );
  }

  async #forwardWaiting(exchange: Exchange): Promise<ForwardOutcome> {
    let token = this.#tokens.currentToken?.();
    if (token === undefined) {
      // The wait for a token (up to `token.waitMs`) ends when the client leaves.
      const waitStart = this.#clock.now();
      try {
        token = await unlessClientGone(this.#accessToken(), exchange.res);
      } finally {
        exchange.trace?.wait('token.wait', waitStart, this.#clock.now());
      }
      if (token === undefined || exchange.clientGone()) return CLIENT_GONE;
    }
    const body = await this.#readBody(exchange.req);
    if (body === undefined) return CLIENT_GONE;
    const first = await this.#attempt(exchange, token, body, body.kind !== 'stream');
    return this.#afterFirst(first, exchange, body);
  }

  /** The first attempt's outcome, or step 6: the 401 was for a token since replaced; once more. */
  #afterFirst(
    first: Attempt,
    exchange: Exchange,
    body: PreparedBody,
  ): ForwardOutcome | Promise<ForwardOutcome> {
    if (first.kind !== 'answered' || !first.replay) return outcomeOf(first, false);
    const waitStart = this.#clock.now();
    return this.#accessToken().then((fresh) => {
      exchange.trace?.wait('token.wait', waitStart, this.#clock.now());
      return this.#attempt(exchange, fresh, body, false).then((second) => outcomeOf(second, true));
    });
  }

  /** One upstream exchange. Not async: on the common path nothing is awaited before dispatch. */
  #attempt(
    exchange: Exchange,
    token: string,
    body: PreparedBody,
    mayReplay: boolean,
  ): Promise<Attempt> {
    if (exchange.clientGone()) return Promise.resolve(GONE_ATTEMPT);
    const { req, res, method } = exchange;
    const call = new UpstreamCall<Exchange>(res, this.#hooks, body.kind !== 'stream', exchange);
    call.label = methodLabel(method);
    call.started = this.#clock.now();
    call.token = token;
    call.mayReplay = mayReplay;
    const span = exchange.trace?.attempt(method, exchange.attempts > 0);
    call.span = span;
    exchange.attempts += 1;
    call.headDeadline = this.#clock.setTimeout(() => {
      call.headDeadline = undefined;
      call.abort(
        'timeout',
        new SidecarError('upstream_timeout', 'no upstream response headers in time'),
      );
    }, this.#timeoutMs);
    call.headDeadline.unref?.();
    try {
      this.#dispatcher.dispatch(
        {
          origin: this.#origin,
          path: this.#basePath + (req.url ?? '/'),
          method,
          headers: upstreamRequestHeaders(req.rawHeaders, {
            host: this.#host,
            accessToken: token,
            requestId: exchange.requestId,
            traceparent: span?.traceparent,
          }),
          body:
            body.kind === 'none'
              ? null
              : upstreamBody(req, body, this.#bodyTimeout, () => {
                  call.abortedBy ??= 'client_body';
                }),
          headersTimeout: this.#timeoutMs,
          bodyTimeout: this.#upstreamBodyTimeoutMs,
        },
        call,
      );
    } catch (err) {
      call.dispatchFailed(err instanceof Error ? err : new Error(String(err)));
    }
    return call.done;
  }

  #clearHeadDeadline(call: CallView<Exchange>): void {
    if (call.headDeadline === undefined) return;
    this.#clock.clearTimeout(call.headDeadline);
    call.headDeadline = undefined;
  }

  #onHead(call: CallView<Exchange>, status: number, upstream: IncomingHttpHeaders): HeadDecision {
    this.#clearHeadDeadline(call);
    const exchange = call.info;
    call.span?.end(status);
    this.#metrics.observeDuration(
      call.label,
      (this.#clock.now() - call.started) / 1000,
      exchange.trace?.sampledTraceId,
    );
    this.#metrics.count(call.label, status);
    if (status === 401) {
      // Always report the token: the keeper decides whether it is still current.
      const verdict = this.#tokens.invalidate(call.token);
      const replay = call.mayReplay && verdict !== 'keep';
      this.#metrics.metrics.upstreamUnauthorized.inc({ replayed: String(replay) });
      if (replay) return { replay: true, bodiless: true, taps: NO_TAPS };
    }
    // STAGE HOOK 2 (stage-runner.ts): the answer head, before the client sees it.
    const stages = this.#stages;
    const taps =
      stages === undefined ? NO_TAPS : stages.taps(exchange, status, { headers: upstream });
    if (!Array.isArray(taps)) return { replay: false, taps: NO_TAPS, ...taps, bodiless: true };
    const headers = clientResponseHeaders(upstream, exchange.requestId, status);
    if (exchange.keepAlive !== undefined) headers['keep-alive'] = exchange.keepAlive;
    return { replay: false, taps, headers, bodiless: bodiless(status, exchange.method) };
  }

  /** The token source promises SidecarErrors; anything else it throws still means "no token". */
  async #accessToken(): Promise<string> {
    try {
      return await this.#tokens.getAccessToken();
    } catch (err) {
      if (err instanceof SidecarError) throw err;
      throw new SidecarError('token_unavailable', 'no access token is available', {
        cause: err,
        retryAfterSeconds: 1,
      });
    }
  }

  async #readBody(req: ClientRequest): Promise<PreparedBody | undefined> {
    if (hasNoBody(req)) return NO_BODY;
    try {
      const body = await prepareBody(req, this.#replayLimit, this.#bodyTimeout);
      // A body streamed upstream holds a pool connection while it arrives.
      if (body.kind === 'stream' && holdWhileBodyArrives(req, this.#streamSlots) === undefined) {
        throw overloadedError(
          `${this.#streamSlots.max} requests are already streaming their bodies; retry shortly`,
        );
      }
      return body;
    } catch (err) {
      if (err instanceof ClientGoneError) return undefined;
      throw err;
    }
  }
}
