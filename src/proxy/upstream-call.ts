/**
 * One upstream attempt as an undici dispatch handler: the answer head goes to the client
 * response, every body chunk is written into it with backpressure (pause/resume), and the
 * exchange settles once. A handler instead of `stream()`: no Writable factory, no `finished()`
 * listeners, no AsyncResource and no AbortController per request (docs/benchmarks.md "Hot
 * path"); aborting goes through undici's own controller.
 *
 * The call is in one state (call-states.ts, docs/design.md "The request path's states"); every
 * change goes through `#to`, which refuses a transition the table does not list. Flow control
 * (`#flow`) is the one other value: the client's backpressure outlives the state it began in (a
 * paused answer is resumed after its client left, to be read and dropped).
 *
 * Ends in one of three ways: the promise resolves with an `Attempt` (answered, cut after the
 * head, client gone), or rejects with the error that came before anything was written.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { TimerHandle } from '../clock.js';
import type { AttemptSpan } from '../telemetry/tracing.js';
import type { AbortCause, Attempt } from './attempt-outcome.js';
import {
  checkTransition,
  isReleased,
  isSettled,
  STATE,
  STATE_NAMES,
  type CallState,
  type StateCode,
} from './call-states.js';
import { closesWithClient, type ClientResponse } from './outcome.js';
import { ClientGoneError } from './request-body.js';
import { ClientTooSlowError, SLOW_READER_DRAIN_BYTES } from './slow-readers.js';
import type { BodyTap } from './stages.js';
import type { CallView, UpstreamCallHooks } from './upstream-hooks.js';

/** The most of an answer read and dropped after its client left, to keep the connection. */
export const DRAIN_LIMIT_BYTES = 64 * 1024;

/** Whether undici may hand over body chunks: `paused` while the client response buffers. */
type Flow = 'flowing' | 'paused';

/** A state the call settles into: which one says what undici still does with the request. */
type SettledState = (typeof STATE)['done' | 'dropping' | 'draining' | 'orphaned'];

export class UpstreamCall<I = undefined> implements Dispatcher.DispatchHandler, CallView<I> {
  abortedBy: AbortCause | undefined;
  /** Bytes handed to the client response, and when its head was written (slow-readers.ts). */
  written = 0;
  headAt = 0;
  upstreamStatus = 0;
  /** The caller's timer for the answer head; the caller arms and clears it. */
  headDeadline: TimerHandle | undefined = undefined;
  // What belongs to this one try, set by the caller as it dispatches: the bounded method label,
  // the bearer sent, when it started, whether a 401 may replay it, and its trace span.
  label = '';
  token = '';
  started = 0;
  mayReplay = false;
  span: AttemptSpan | undefined = undefined;
  readonly done: Promise<Attempt>;
  /** What the caller's hooks need to know about the request. */
  readonly info: I;

  #state: StateCode = STATE.queued;
  #flow: Flow = 'flowing';
  /** undici's controller for this request (undefined while it waits for a connection). */
  #controller: Dispatcher.DispatchController | undefined;
  /** In `dropping`: what undici is told when it would start the request. */
  #dropReason: Error | undefined;
  /** Made only when asked for (a request undici still holds after the exchange settled). */
  #released: Promise<void> | undefined;
  #release: (() => void) | undefined;
  #resolve!: (attempt: Attempt) => void;
  #reject!: (err: Error) => void;
  #taps: BodyTap[] = [];
  /** In `served`: the status a stage answered the client with instead of the upstream's. */
  #servedStatus: number | undefined;
  #drained = 0;
  #drainLimit = DRAIN_LIMIT_BYTES;
  readonly #drainable: boolean;
  readonly #res: ClientResponse;
  readonly #client: ReturnType<typeof closesWithClient>;
  readonly #hooks: UpstreamCallHooks<I>;

  /**
   * @param drainable the request body is sent whole (none or buffered): when the client leaves,
   *   the answer can be read to its end and the connection kept.
   */
  constructor(res: ClientResponse, hooks: UpstreamCallHooks<I>, drainable: boolean, info: I) {
    this.#res = res;
    this.#hooks = hooks;
    this.#drainable = drainable;
    this.info = info;
    this.done = new Promise<Attempt>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    const client = closesWithClient(res);
    this.#client = client;
    // Each call listens for itself (a 401 replay is a second call on the same response; the first
    // is settled by then and ignores the close). A WeakMap from the response to its call cost far
    // more than these closures (docs/benchmarks.md "Tried and not kept").
    client.on('close', () => this.clientClosed());
  }

  get state(): CallState {
    return STATE_NAMES[this.#state] ?? 'done';
  }

  /** The client response this call writes into. */
  get res(): ClientResponse {
    return this.#res;
  }

  get clientEnded(): boolean {
    return this.#res.writableEnded;
  }

  get isReleased(): boolean {
    return isReleased(this.#state);
  }

  /** Resolves once undici is finished with the request (answered, failed or dropped). */
  get released(): Promise<void> {
    if (isReleased(this.#state)) return Promise.resolve();
    this.#released ??= new Promise<void>((resolve) => {
      this.#release = resolve;
    });
    return this.#released;
  }

  /** Of `written`, what the response still buffers (the socket has not taken it). */
  get unsent(): number {
    return (this.#res as { writableLength?: number }).writableLength ?? 0;
  }

  /** The client's side closed. */
  clientClosed(): void {
    // Finished (only once we ended it: the h2 compat response reports `writableFinished` on a
    // reset too), or destroyed by us after an upstream failure: not the client's doing.
    const res = this.#res;
    if ((res.writableFinished && res.writableEnded) || isSettled(this.#state)) return;
    this.abort('client', new ClientGoneError());
  }

  /**
   * The answer of a client that left is still being read (`onDraining`): give up the connection
   * instead. Nothing happens once undici is done with the request.
   */
  stopDraining(): void {
    if (this.#state === STATE.draining) this.#controller?.abort(new ClientGoneError());
  }

  /** The client reads too slowly: close its connection; the rest of the answer is dropped. */
  tooSlow(): void {
    this.abort('client_slow', new ClientTooSlowError());
  }

  /** `dispatch()` threw instead of calling the handler: the exchange fails with `err`. */
  dispatchFailed(err: Error): void {
    this.#conclude(err, STATE.done);
  }

  /** Abort from this side (timeout, client gone, client body stalled, client too slow). */
  abort(cause: AbortCause, reason: Error): void {
    const state = this.#state;
    if (isSettled(state)) return;
    this.abortedBy ??= cause;
    if (state === STATE.finishing) {
      // The upstream is done; only the client's side is still being written: it was cut.
      this.#conclude(reason, STATE.done);
      return;
    }
    if (state === STATE.queued) {
      // Still queued for a connection: answer now; undici drops it when it would start.
      this.#dropReason = reason;
      this.#conclude(reason, STATE.dropping);
      return;
    }
    // undici holds the controller from here on (sent, streaming, bodiless, replaying, served).
    if (cause === 'client' && this.#owned()) {
      // A cache fill belongs to the cache, not to this client: the answer is read on for it
      // (bounded by the tap's own limit) and the waiters get it; the client's part ends now.
      this.#conclude(reason, STATE.orphaned);
      this.#resume();
      return;
    }
    if ((cause === 'client' || cause === 'client_slow') && this.#drainable) {
      // The request is written: read the rest of the answer and drop it (DRAIN_LIMIT_BYTES, or
      // SLOW_READER_DRAIN_BYTES for a client cut as too slow) to keep the connection; an abort
      // costs the upstream a new TLS connection each.
      if (cause === 'client_slow') this.#drainLimit = SLOW_READER_DRAIN_BYTES;
      // Concluded first: resuming can run the parser over buffered bytes at once, and the
      // answer's end must then find the exchange already settled as the client's leaving.
      this.#conclude(reason, STATE.draining);
      this.#hooks.onDraining?.(this);
      this.#resume();
      return;
    }
    this.#controller?.abort(reason);
  }

  // undici's public dispatch handler API: the controller pauses, resumes and aborts.

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#state === STATE.dropping) {
      // Thrown, not `controller.abort()`: on HTTP/1.1 undici's abort destroys the connection the
      // request was given (client-h1.js), and the pool opens another, a TLS handshake per dropped
      // request (test/bounded-work.test.ts: 2 connections instead of 1); a throw is caught there
      // and drops the request unsent on a connection kept (docs/design.md "Exceptions").
      throw this.#dropReason ?? new ClientGoneError();
    }
    this.#to(STATE.sent);
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (statusCode < 200 || this.#state !== STATE.sent) return;
    if (this.#client.destroyed) {
      // Gone before its answer came (its close may have been missed): nothing to write to.
      this.abort('client', new ClientGoneError());
      return;
    }
    this.upstreamStatus = statusCode;
    const decision = this.#hooks.onHead(this, statusCode, headers);
    if (decision.served !== undefined) {
      this.#servedStatus = decision.served;
      this.#to(STATE.served);
      return;
    }
    if (decision.replay) {
      this.#to(STATE.replaying);
      return;
    }
    const res = this.#res;
    // Both node responses take either form; their overloads differ only in the array's type.
    (res as ServerResponse).writeHead(statusCode, decision.headers as OutgoingHttpHeaders);
    if (this.#hooks.readers !== undefined) this.headAt = this.#hooks.readers.now();
    this.#taps = decision.taps;
    if (decision.bodiless) {
      // A body the upstream sent anyway is swallowed; the client's framing stays intact.
      this.#to(STATE.bodiless);
      res.end();
      this.#endTaps(true);
      return;
    }
    this.#to(STATE.streaming);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const state = this.#state;
    if (state === STATE.streaming) {
      this.#stream(chunk);
      return;
    }
    if (state === STATE.orphaned) {
      for (const tap of this.#taps) tap.chunk(chunk);
      if (!this.#owned()) this.#controller?.abort(new ClientGoneError());
      return;
    }
    if (state === STATE.draining) {
      this.#drained += chunk.length;
      if (this.#drained > this.#drainLimit) this.#controller?.abort(new ClientGoneError());
    }
    // bodiless, replaying, served: the body is dropped.
  }

  onResponseEnd(): void {
    const state = this.#state;
    this.#hooks.readers?.upstreamEnded(this);
    // The answer is complete when it arrived, not when a slow client has taken it all.
    this.#endTaps(state === STATE.streaming || state === STATE.orphaned);
    if (state === STATE.streaming) {
      this.#to(STATE.finishing);
      // Settled when node has handed the last bytes over: 'finish' of the response, or on h2 of
      // the stream (the compat response emits 'finish' on any close of its stream, a reset too).
      this.#client.on('finish', () => this.clientFinished());
      (this.#res as ServerResponse).end();
      return;
    }
    if (isSettled(state)) {
      if (state !== STATE.done) this.#to(STATE.done);
      return;
    }
    // bodiless, replaying, served: the answer is complete as the client has it.
    const upstreamStatus = this.upstreamStatus;
    const replay = state === STATE.replaying;
    const status = this.#servedStatus;
    this.#succeed({ kind: 'answered', upstreamStatus, replay, status }, STATE.done);
  }

  /** The client response finished after the upstream's answer ended. */
  clientFinished(): void {
    if (this.#state !== STATE.finishing) return;
    const upstreamStatus = this.upstreamStatus;
    this.#succeed(
      { kind: 'answered', upstreamStatus, replay: false, status: undefined },
      STATE.done,
    );
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    const state = this.#state;
    this.#endTaps(false);
    if (!isSettled(state)) this.#conclude(err, STATE.done);
    else if (state !== STATE.done) this.#to(STATE.done);
  }

  /** The one place the state changes: a transition call-states.ts does not list throws. */
  #to(next: StateCode): void {
    checkTransition(this.#state, next);
    this.#state = next;
    if (this.#release !== undefined && isReleased(next)) this.#release();
  }

  /** A body chunk of an answer being streamed to the client. */
  #stream(chunk: Buffer): void {
    const res = this.#res;
    if (this.#client.destroyed) {
      this.abort('client', new ClientGoneError());
      return;
    }
    for (const tap of this.#taps) tap.chunk(chunk);
    this.written += chunk.length;
    // Both node responses write a Buffer the same way; their overloads differ only in encoding.
    // A tap that owns the answer reads on at the upstream's pace: a slow client holds no waiter.
    if (!(res as ServerResponse).write(chunk) && !this.#owned()) {
      this.#flow = 'paused';
      this.#controller?.pause();
      res.once('drain', () => this.#resume());
      // Streaming: the upstream's answer has not ended, so it holds its connection.
      const readers = this.#hooks.readers;
      if (readers !== undefined && !readers.stall(this, true)) this.tooSlow();
    }
  }

  /** Some tap still owns the answer (a cache fill that is capturing). */
  #owned(): boolean {
    for (const tap of this.#taps) if (tap.owning?.() === true) return true;
    return false;
  }

  /** Let undici read the body again after backpressure (or to drain it). */
  #resume(): void {
    if (this.#flow !== 'paused') return;
    this.#flow = 'flowing';
    this.#hooks.readers?.flowing(this);
    this.#controller?.resume();
  }

  /**
   * The exchange failed or was aborted: the caller's classification decides how it ends, and
   * `next` what undici still does with the request.
   */
  #conclude(err: Error, next: SettledState): void {
    const state = this.#state;
    if (isSettled(state)) return;
    if (state === STATE.served) {
      // The client has its whole answer already; only the dropped upstream body failed.
      const { upstreamStatus } = this;
      const answered: Attempt = {
        kind: 'answered',
        upstreamStatus,
        replay: false,
        status: this.#servedStatus,
      };
      this.#succeed(answered, next);
      return;
    }
    const verdict = this.#hooks.onError(this, err);
    if (verdict instanceof Error) {
      this.#fail(verdict, next);
      return;
    }
    if (verdict.kind === 'cut' && !this.#client.destroyed) this.#res.destroy();
    if (next !== STATE.orphaned) this.#endTaps(verdict.kind === 'answered');
    this.#succeed(verdict, next);
  }

  #endTaps(complete: boolean): void {
    const taps = this.#taps;
    if (taps.length === 0) return;
    this.#taps = [];
    for (const tap of taps) tap.end(complete);
  }

  #succeed(attempt: Attempt, next: SettledState): void {
    this.#settle(next);
    this.#resolve(attempt);
  }

  #fail(err: Error, next: SettledState): void {
    this.#settle(next);
    this.#endTaps(false);
    this.#reject(err);
  }

  #settle(next: SettledState): void {
    this.#to(next);
    this.#hooks.readers?.flowing(this);
    this.#hooks.onSettled?.(this);
  }
}
