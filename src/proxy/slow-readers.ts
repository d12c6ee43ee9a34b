/**
 * Slow readers (docs/design.md "Bounded work"): a client response whose `write` returned false is
 * "not reading" until it drains or ends. Such requests hold at most `maxStalled` of the in-flight
 * slots and `maxStalledUpstream` of the upstream connections (an answer whose upstream has not
 * ended holds its connection while paused); a request that would go over either is cut at once.
 * A request that stays not reading is also judged on its average rate: after its first
 * MIN_READ_GRACE_MS it must have taken at least `minBytesPerSecond` on average, else it is cut.
 *
 * Cost on the hot path: the caller adds each chunk's length to its own count (one add per write);
 * this module is touched only when a write returns false. One timer, running only while some
 * request is not reading, sweeps once a second.
 */
import type { Clock, TimerHandle } from '../clock.js';

/** A response is not judged on its average read rate before this much time after its head. */
export const MIN_READ_GRACE_MS = 10_000;
/** How often the requests not reading are judged on their rate. */
export const READ_SWEEP_MS = 1_000;

/**
 * The most of an answer read and dropped after its client was cut for reading too slowly: a
 * slow-reader flood would otherwise cost the upstream a new TLS connection per request.
 */
export const SLOW_READER_DRAIN_BYTES = 1024 * 1024;

/** The client read the answer too slowly, or stopped reading while too many others had. */
export class ClientTooSlowError extends Error {
  constructor() {
    super('the client read the answer too slowly');
    this.name = 'ClientTooSlowError';
  }
}

/** What the watch needs of a request whose client is not reading. */
export interface Stalled {
  /** Bytes handed to the client response so far. */
  readonly written: number;
  /** Of those, still buffered in the process (not yet taken by the socket). */
  readonly unsent: number;
  /** When the answer's head was written (the clock's `now`). */
  readonly headAt: number;
  /** Cut the request: close the client's connection, abort the upstream request. */
  tooSlow(): void;
}

export interface SlowReaderLimits {
  /** Half of `proxy.maxInFlight`. */
  maxStalled: number;
  /** Half of `upstream.maxConnections`. */
  maxStalledUpstream: number;
  /** `proxy.minBodyBytesPerSecond`; 0: no minimum rate (the caps still apply). */
  minBytesPerSecond: number;
  clock: Pick<Clock, 'now' | 'setTimeout'>;
}

export class SlowReaders {
  /** Each request not reading, and whether it holds an upstream connection. */
  readonly #stalled = new Map<Stalled, boolean>();
  #upstreamHeld = 0;
  #timer: TimerHandle | undefined;
  readonly #limits: SlowReaderLimits;
  readonly #sweep = (): void => this.#onSweep();

  constructor(limits: SlowReaderLimits) {
    this.#limits = limits;
  }

  /** The clock's time, for a request's `headAt`. */
  now(): number {
    return this.#limits.clock.now();
  }

  get stalled(): number {
    return this.#stalled.size;
  }

  get stalledUpstream(): number {
    return this.#upstreamHeld;
  }

  /**
   * `request`'s client stopped reading; `holdsUpstream` while its upstream answer has not ended.
   * False when that goes over a cap: the caller cuts it.
   */
  stall(request: Stalled, holdsUpstream: boolean): boolean {
    if (this.#stalled.has(request)) return true;
    const limits = this.#limits;
    if (this.#stalled.size >= limits.maxStalled) return false;
    if (holdsUpstream && this.#upstreamHeld >= limits.maxStalledUpstream) return false;
    this.#stalled.set(request, holdsUpstream);
    if (holdsUpstream) this.#upstreamHeld += 1;
    this.#arm();
    return true;
  }

  /** Its upstream answer ended: the connection is back in the pool. */
  upstreamEnded(request: Stalled): void {
    if (this.#stalled.get(request) !== true) return;
    this.#stalled.set(request, false);
    this.#upstreamHeld -= 1;
  }

  /** Its client read again (drain), or the request ended. */
  flowing(request: Stalled): void {
    const holds = this.#stalled.get(request);
    if (holds === undefined) return;
    this.#stalled.delete(request);
    if (holds) this.#upstreamHeld -= 1;
  }

  #arm(): void {
    if (this.#timer !== undefined || this.#limits.minBytesPerSecond <= 0) return;
    this.#timer = this.#limits.clock.setTimeout(this.#sweep, READ_SWEEP_MS);
    this.#timer.unref?.();
  }

  #onSweep(): void {
    this.#timer = undefined;
    const { clock, minBytesPerSecond } = this.#limits;
    const now = clock.now();
    const slow: Stalled[] = [];
    for (const request of this.#stalled.keys()) {
      const elapsed = now - request.headAt;
      if (elapsed < MIN_READ_GRACE_MS) continue;
      const taken = request.written - request.unsent;
      if ((taken * 1000) / elapsed < minBytesPerSecond) slow.push(request);
    }
    for (const request of slow) {
      this.flowing(request);
      request.tooSlow();
    }
    if (this.#stalled.size > 0) this.#arm();
  }
}
