/**
 * The HTTP/1.1 listener's keep-alive timeout: connections that stay idle longer than the timeout
 * are closed, by one sweep timer per listener instead of node's timer per answer.
 *
 * node's own (`server.keepAliveTimeout`) is a socket timeout armed after every answer and disarmed
 * by the next request: per request a bound function, a `Timeout`, two timer-list updates (a list
 * made and dropped when it empties) and a refresh on every read while armed. Under load that
 * cost the sidecar 11 % of its CPU per 2 KB request (docs/benchmarks.md "Keep-alive sweep (ninth
 * pass)"). The listener therefore runs with node's timeout off, and this sweep does the closing.
 *
 * A connection is quiet when no request on it is in progress (`busy`) and it moved no byte since
 * the previous sweep (`bytesRead`, `bytesWritten`). It is closed once it has been quiet for
 * `closeAfterMs` by the monotonic clock. Never earlier: the quiet time counts from the sweep that
 * last saw it move (after its last byte), or the first sweep that found its request over. At most
 * one sweep interval later (two when a request had just ended). Nothing is done per request: the
 * pipeline gate's count says whether a request is in progress, and the byte counters are node's.
 *
 * The sweep timer is unref'd and runs only while connections are tracked.
 */
import type { ServerResponse } from 'node:http';
import {
  monotonicNow,
  systemClock,
  type Clock,
  type MonotonicNow,
  type TimerHandle,
} from '../clock.js';

/** The keep-alive timeout the listener advertises (`Keep-Alive: timeout=65`). */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/**
 * How much longer than advertised a connection is kept: node's `keepAliveTimeoutBuffer` (1 s), so
 * a client that honours the advertised timeout closes first.
 */
export const KEEP_ALIVE_GRACE_MS = 1_000;

/** The sweep interval: an idle connection is closed at most this late (twice this right after a request). */
export const SWEEP_INTERVAL_MS = 1_000;

/** A connection as the sweep needs it: node's byte counters, and a way to close it. */
export interface SweptSocket {
  readonly bytesRead: number;
  readonly bytesWritten: number;
  destroy(): unknown;
  once(event: 'close', listener: () => void): unknown;
}

export interface IdleSweepOptions<S extends SweptSocket> {
  /** Quiet time after which a connection is closed. */
  closeAfterMs: number;
  /** True while a request of this connection is in progress (or waiting to start). */
  busy(this: void, socket: S): boolean;
  intervalMs?: number;
  clock?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  now?: MonotonicNow;
}

export interface IdleSweep<S extends SweptSocket> {
  /** Watch a new connection (the server's 'connection' event). */
  track(this: void, socket: S): void;
  /** Connections watched now. */
  readonly size: number;
  /** Stop the timer; tracked connections are left to whoever closes the server. */
  stop(): void;
}

interface Watched {
  read: number;
  written: number;
  quietSince: number;
}

/** Not yet seen quiet since its last request. */
const UNKNOWN = -1;

export function createIdleSweep<S extends SweptSocket>(options: IdleSweepOptions<S>): IdleSweep<S> {
  const { closeAfterMs, busy } = options;
  const intervalMs = options.intervalMs ?? SWEEP_INTERVAL_MS;
  const clock = options.clock ?? systemClock;
  const now = options.now ?? monotonicNow;
  const watched = new Map<S, Watched>();
  let timer: TimerHandle | undefined;
  let stopped = false;

  function arm(): void {
    if (timer !== undefined || stopped || watched.size === 0) return;
    timer = clock.setTimeout(onTimer, intervalMs);
    timer.unref?.();
  }

  function onTimer(): void {
    timer = undefined;
    sweep();
    arm();
  }

  function sweep(): void {
    const at = now();
    for (const [socket, state] of watched) {
      const read = socket.bytesRead;
      const written = socket.bytesWritten;
      if (busy(socket)) {
        // Its request ends after this sweep: quiet from a later sweep on.
        state.quietSince = UNKNOWN;
      } else if (read !== state.read || written !== state.written || state.quietSince === UNKNOWN) {
        // Its last byte moved before now.
        state.quietSince = at;
      } else if (at - state.quietSince >= closeAfterMs) {
        watched.delete(socket);
        socket.destroy();
        continue;
      }
      state.read = read;
      state.written = written;
    }
  }

  return {
    track(socket) {
      if (stopped || watched.has(socket)) return;
      watched.set(socket, {
        read: socket.bytesRead,
        written: socket.bytesWritten,
        quietSince: now(),
      });
      socket.once('close', () => watched.delete(socket));
      arm();
    },
    get size() {
      return watched.size;
    },
    stop() {
      stopped = true;
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
    },
  };
}

/**
 * Make node write `Keep-Alive: timeout=<s>` in this answer, as it does by itself when
 * `server.keepAliveTimeout` is set (node copies that into this field of every answer, and writes the
 * field only when the connection stays open). The listener's own is 0, so that node arms no timer;
 * the advertised timeout is this sweep's. test/keep-alive.test.ts fails if a node release stops
 * reading the field.
 */
export function advertiseKeepAlive(res: ServerResponse, timeoutMs: number): void {
  (res as unknown as { _keepAliveTimeout: number })._keepAliveTimeout = timeoutMs;
}
