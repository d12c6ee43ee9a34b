/**
 * One upstream exchange as an undici dispatch handler: the answer head goes to the client
 * response, every body chunk is written into it with backpressure (pause/resume), and the
 * exchange settles once. A handler instead of `stream()`: no Writable factory, no `finished()`
 * listeners, no AsyncResource and no AbortController per request (docs/benchmarks.md "Hot
 * path"); aborting goes through undici's own controller.
 *
 * Ends in one of three ways: the promise resolves with an `Attempt` (answered, cut after the
 * head, client gone), or rejects with the error that came before anything was written.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { TimerHandle } from '../clock.js';
import type { AbortCause, Attempt } from './attempt-outcome.js';
import { DispatchedRequest } from './dispatched-request.js';
import { closesWithClient, type ClientResponse } from './outcome.js';
import { ClientGoneError } from './request-body.js';
import { ClientTooSlowError, SLOW_READER_DRAIN_BYTES } from './slow-readers.js';
import type { BodyTap } from './stages.js';
import type { CallView, UpstreamCallHooks } from './upstream-hooks.js';

/** The most of an answer read and dropped after its client left, to keep the connection. */
export const DRAIN_LIMIT_BYTES = 64 * 1024;

export class UpstreamCall<I = undefined>
  extends DispatchedRequest
  implements Dispatcher.DispatchHandler, CallView<I>
{
  abortedBy: AbortCause | undefined;
  /** Bytes handed to the client response, and when its head was written (slow-readers.ts). */
  written = 0;
  headAt = 0;
  headersSeen = false;
  upstreamStatus = 0;
  wrote = false;
  replay = false;
  /** The caller's timer for the answer head; the caller arms and clears it. */
  headDeadline: TimerHandle | undefined = undefined;
  readonly done: Promise<Attempt>;
  /** What the caller's hooks need to know about the request. */
  readonly info: I;
  /** The client response this call writes into. */
  get res(): ClientResponse {
    return this.#res;
  }

  get clientEnded(): boolean {
    return this.#res.writableEnded;
  }

  #paused = false;
  #settled = false;
  #resolve!: (attempt: Attempt) => void;
  #reject!: (err: Error) => void;
  #taps: BodyTap[] = [];
  #discard = false;
  /** The status a stage answered the client with instead of the upstream's answer. */
  #served: number | undefined;
  /** The answer that `clientFinished` settles with once node wrote all of it. */
  #answered: Attempt | undefined;
  /** The client left after the request was written: the answer is read and dropped. */
  #draining = false;
  /** The client left while a tap owned the answer: it is read on for the tap alone. */
  #orphaned = false;
  #drained = 0;
  #drainLimit = DRAIN_LIMIT_BYTES;
  readonly #drainable: boolean;
  #upstreamEnded = false;
  readonly #res: ClientResponse;
  readonly #client: ReturnType<typeof closesWithClient>;
  readonly #hooks: UpstreamCallHooks<I>;

  /** The client's side closed. */
  clientClosed(): void {
    // Finished (only once we ended it: the h2 compat response reports `writableFinished` on a
    // reset too), or destroyed by us after an upstream failure: not the client's doing.
    const res = this.#res;
    if ((res.writableFinished && res.writableEnded) || this.#settled) return;
    this.abort('client', new ClientGoneError());
  }

  /**
   * @param drainable the request body is sent whole (none or buffered): when the client leaves,
   *   the answer can be read to its end and the connection kept.
   */
  constructor(res: ClientResponse, hooks: UpstreamCallHooks<I>, drainable: boolean, info: I) {
    super();
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

  /**
   * The answer of a client that left is still being read (`onDraining`): give up the connection
   * instead. Nothing happens once undici is done with the request.
   */
  stopDraining(): void {
    if (this.#draining && !this.isReleased) this.controller?.abort(new ClientGoneError());
  }

  /** Of `written`, what the response still buffers (the socket has not taken it). */
  get unsent(): number {
    return (this.#res as { writableLength?: number }).writableLength ?? 0;
  }

  /** The client reads too slowly: close its connection; the rest of the answer is dropped. */
  tooSlow(): void {
    this.abort('client_slow', new ClientTooSlowError());
  }

  /** `dispatch()` threw instead of calling the handler: the exchange fails with `err`. */
  dispatchFailed(err: Error): void {
    this.markReleased();
    this.#conclude(err);
  }

  /** Abort from this side (timeout, client gone, client body stalled). */
  abort(cause: AbortCause, reason: Error): void {
    if (this.#settled) return;
    this.abortedBy ??= cause;
    if (this.#upstreamEnded) {
      // The upstream is done; only the client's side is still being written: it was cut.
      this.#conclude(reason);
      return;
    }
    if (this.controller !== undefined) {
      if (cause === 'client' && this.#owned()) {
        // A cache fill belongs to the cache, not to this client: the answer is read on for it
        // (bounded by the tap's own limit) and the waiters get it; the client's part ends now.
        this.#orphaned = true;
        this.#conclude(reason);
        this.#resume();
        return;
      }
      if ((cause === 'client' || cause === 'client_slow') && this.#drainable) {
        // The request is written: read the rest of the answer and drop it (DRAIN_LIMIT_BYTES, or
        // SLOW_READER_DRAIN_BYTES for a client cut as too slow) to keep the connection; an abort
        // costs the upstream a new TLS connection each.
        if (cause === 'client_slow') this.#drainLimit = SLOW_READER_DRAIN_BYTES;
        this.#draining = true;
        this.#discard = true;
        // Concluded first: resuming can run the parser over buffered bytes at once, and the
        // answer's end must then find the exchange already settled as the client's leaving.
        this.#conclude(reason);
        this.#hooks.onDraining?.(this);
        this.#resume();
        return;
      }
      this.controller.abort(reason);
      return;
    }
    // Still queued for a connection: answer now; undici drops it when it would start.
    this.dropOnStart(reason);
    this.#conclude(reason);
  }

  // undici's public dispatch handler API (onRequestStart: dispatched-request.ts).

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (statusCode < 200 || this.#settled) return;
    if (this.#client.destroyed) {
      // Gone before its answer came (its close may have been missed): nothing to write to.
      this.abort('client', new ClientGoneError());
      return;
    }
    this.headersSeen = true;
    this.upstreamStatus = statusCode;
    const decision = this.#hooks.onHead(this, statusCode, headers);
    if (decision.served !== undefined) {
      this.#served = decision.served;
      this.#discard = true;
      return;
    }
    if (decision.replay) {
      this.replay = true;
      this.#discard = true;
      return;
    }
    const res = this.#res;
    // Both node responses take either form; their overloads differ only in the array's type.
    (res as ServerResponse).writeHead(statusCode, decision.headers as OutgoingHttpHeaders);
    this.wrote = true;
    if (this.#hooks.readers !== undefined) this.headAt = this.#hooks.readers.now();
    this.#taps = decision.taps;
    if (decision.bodiless) {
      // A body the upstream sent anyway is swallowed; the client's framing stays intact.
      this.#discard = true;
      res.end();
      this.#endTaps(true);
    }
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#orphaned) {
      for (const tap of this.#taps) tap.chunk(chunk);
      if (!this.#owned()) this.controller?.abort(new ClientGoneError());
      return;
    }
    if (this.#draining) {
      this.#drained += chunk.length;
      if (this.#drained > this.#drainLimit) this.controller?.abort(new ClientGoneError());
      return;
    }
    if (this.#discard || this.#settled) return;
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
      this.#paused = true;
      this.controller?.pause();
      res.once('drain', () => this.#resume());
      const readers = this.#hooks.readers;
      if (readers !== undefined && !readers.stall(this, !this.#upstreamEnded)) this.tooSlow();
    }
  }

  onResponseEnd(): void {
    this.markReleased();
    this.#hooks.readers?.upstreamEnded(this);
    // The answer is complete when it arrived, not when a slow client has taken it all.
    this.#endTaps(!this.#discard || this.#orphaned);
    if (this.#settled) return;
    this.#upstreamEnded = true;
    const answered: Attempt = {
      kind: 'answered',
      upstreamStatus: this.upstreamStatus,
      replay: this.replay,
      status: this.#served,
    };
    if (this.#discard) {
      this.#succeed(answered);
      return;
    }
    this.#answered = answered;
    // Settled when node has handed the last bytes over: 'finish' of the response, or on h2 of
    // the stream (the compat response emits 'finish' on any close of its stream, a reset too).
    this.#client.on('finish', () => this.clientFinished());
    (this.#res as ServerResponse).end();
  }

  /** The client response finished after the upstream's answer ended. */
  clientFinished(): void {
    const answered = this.#answered;
    if (answered === undefined) return;
    this.#succeed(answered);
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    this.markReleased();
    this.#endTaps(false);
    this.#conclude(err);
  }

  /** Some tap still owns the answer (a cache fill that is capturing). */
  #owned(): boolean {
    for (const tap of this.#taps) if (tap.owning?.() === true) return true;
    return false;
  }

  /** Let undici read the body again after backpressure (or to drain it). */
  #resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#hooks.readers?.flowing(this);
    this.controller?.resume();
  }

  /** The exchange failed or was aborted: the caller's classification decides how it ends. */
  #conclude(err: Error): void {
    if (this.#settled) return;
    if (this.#served !== undefined) {
      // The client has its whole answer already; only the dropped upstream body failed.
      const { upstreamStatus } = this;
      this.#succeed({ kind: 'answered', upstreamStatus, replay: false, status: this.#served });
      return;
    }
    const verdict = this.#hooks.onError(this, err);
    if (verdict instanceof Error) {
      this.#fail(verdict);
      return;
    }
    if (verdict.kind === 'cut' && !this.#client.destroyed) this.#res.destroy();
    if (!this.#orphaned) this.#endTaps(verdict.kind === 'answered');
    this.#succeed(verdict);
  }

  #endTaps(complete: boolean): void {
    const taps = this.#taps;
    if (taps.length === 0) return;
    this.#taps = [];
    for (const tap of taps) tap.end(complete);
  }

  #succeed(attempt: Attempt): void {
    if (this.#settled) return;
    this.#settle();
    this.#resolve(attempt);
  }

  #fail(err: Error): void {
    if (this.#settled) return;
    this.#settle();
    this.#endTaps(false);
    this.#reject(err);
  }

  #settle(): void {
    this.#settled = true;
    this.#hooks.readers?.flowing(this);
    this.#hooks.onSettled?.(this);
  }
}
