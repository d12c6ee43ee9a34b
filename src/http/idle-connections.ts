/**
 * The HTTP/1.1 keep-alive timeout, kept by one sweep timer per listener: node's own
 * (`server.keepAliveTimeout`) arms a socket timer per answer (its cost per request:
 * docs/benchmarks.md "Keep-alive sweep"). A connection is closed once it has had no request in
 * progress and moved no byte for `closeAfterMs`, never earlier, at most two sweeps later.
 */
import type { IncomingMessage } from 'node:http';
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

/** Update `state` from the socket's byte counts; true when it has been quiet for `closeAfterMs`. */
function quietTooLong<S extends SweptSocket>(
  socket: S,
  state: Watched,
  at: number,
  closeAfterMs: number,
  busy: (socket: S) => boolean,
): boolean {
  const read = socket.bytesRead;
  const written = socket.bytesWritten;
  if (busy(socket)) {
    // Its request ends after this sweep: quiet from a later sweep on.
    state.quietSince = UNKNOWN;
  } else if (read !== state.read || written !== state.written || state.quietSince === UNKNOWN) {
    // Its last byte moved before now.
    state.quietSince = at;
  } else if (at - state.quietSince >= closeAfterMs) {
    return true;
  }
  state.read = read;
  state.written = written;
  return false;
}

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
      if (quietTooLong(socket, state, at, closeAfterMs, busy)) {
        watched.delete(socket);
        socket.destroy();
      }
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

const CLOSE = /(?:^|,)\s*close\s*(?:,|$)/i;
const KEEP_ALIVE = /(?:^|,)\s*keep-alive\s*(?:,|$)/i;

/**
 * True when node keeps this request's connection open after the answer (RFC 9112 §9.3): HTTP/1.1
 * unless the client sent `close`, HTTP/1.0 only when it asked for `keep-alive`.
 */
export function persistent(req: IncomingMessage): boolean {
  const connection = req.headers.connection;
  if (req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
    return connection === undefined || !CLOSE.test(connection);
  }
  return connection !== undefined && KEEP_ALIVE.test(connection);
}
