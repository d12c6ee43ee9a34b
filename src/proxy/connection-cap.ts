/**
 * `upstream.maxConnections` as a hard bound (docs/design.md "Bounded work"): the one Pool of an
 * origin, for the direct path (dispatcher.ts) and for each Pool the egress proxy's agent makes
 * (egress-agent.ts). undici's Pool is imported by path as in dispatcher.ts (docs/design.md
 * "Exceptions"); it is the very class the package exports.
 */
import type { buildConnector as BuildConnector, Pool as PoolType } from 'undici';
import Pool from 'undici/lib/dispatcher/pool.js';

/** Wraps connectors so that at most a number of their sockets are open at once ({@link socketCap}). */
export type SocketCap = (connect: BuildConnector.connector) => BuildConnector.connector;

/**
 * At most `max` sockets open at once among the connectors it wraps (one Pool's, or each Pool an
 * Agent makes for the origin); a connection asked for beyond that waits for one to close. The
 * hard bound under the Pools' own count of clients, which is bookkeeping undici may get wrong
 * ({@link cappedPool}). At most one connection waits per client (a client dials once at a time).
 */
export function socketCap(max: number): SocketCap {
  let open = 0;
  const waiting: (() => void)[] = [];
  const release = (): void => {
    open -= 1;
    waiting.shift()?.();
  };
  return (connect) => (options, callback) => {
    const start = (): void => {
      open += 1;
      connect(options, (...args) => {
        const [error, socket] = args;
        if (error === null) socket.once('close', release);
        else release();
        callback(...args);
      });
    };
    if (open < max) start();
    else waiting.push(start);
  };
}

/**
 * undici's Pool for `origin`, its connector under `cap` when one is given, keeping a client whose
 * connection attempt failed among its clients. undici's Pool (since 7.5.0; still so in 8.10)
 * drops such a client from its list on its own 'connectionError', yet the client still takes the
 * pool's queued requests and dials again while the next request makes it a replacement: one
 * socket past `connections` per failed attempt under load. Kept, it is one of the `connections`
 * and dials again when it has work, as before 7.5.0 (docs/design.md "Exceptions").
 */
export function cappedPool(
  origin: string,
  options: PoolType.Options,
  cap: SocketCap | undefined,
): PoolType {
  const { connect } = options;
  const pool = new Pool(
    origin,
    cap === undefined || typeof connect !== 'function'
      ? options
      : { ...options, connect: cap(connect) },
  );
  pool.removeAllListeners('connectionError');
  return pool;
}
