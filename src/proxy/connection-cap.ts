/**
 * `upstream.maxConnections` as a hard bound (docs/design.md "Bounded work"), for the direct Pool
 * (dispatcher.ts) and the Pools of the egress proxy's agent (egress-agent.ts).
 */
import type { buildConnector as BuildConnector, Dispatcher } from 'undici';

/**
 * At most `max` sockets open at once among the connectors it wraps (one Pool's, or each Pool an
 * Agent makes for the origin); a connection asked for beyond that waits for one to close. The
 * hard bound under the Pools' own count of clients, which is bookkeeping undici may get wrong
 * ({@link keepFailedClients}). At most one connection waits per client (a client dials once at a time).
 */
export function socketCap(
  max: number,
): (connect: BuildConnector.connector) => BuildConnector.connector {
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
 * Keeps a client whose connection attempt failed among `pool`'s clients. undici's Pool (since
 * 7.5.0; still so in 8.10) drops it from its list on its own 'connectionError', yet the client
 * still takes the pool's queued requests and dials again while the next request makes it a
 * replacement: one socket past `connections` per failed attempt under load. Kept, it is one of
 * the `connections` and dials again when it has work, as before 7.5.0 (docs/design.md
 * "Exceptions").
 */
export function keepFailedClients<T extends Dispatcher>(pool: T): T {
  pool.removeAllListeners('connectionError');
  return pool;
}
