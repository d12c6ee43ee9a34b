import type { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import type { ClientRequest } from './request-body.js';

export type ClientResponse = ServerResponse | Http2ServerResponse;

/**
 * What closes when the client goes: the h2 stream (an h2 compat response has no `destroyed` of
 * its own, and writing to a reset stream returns false with no 'drain' ever), else the response.
 */
export function closesWithClient(res: ClientResponse): EventEmitter & { destroyed: boolean } {
  return 'stream' in res ? res.stream : res;
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
  result: 'complete' | 'client_closed' | 'client_too_slow' | 'upstream_failed';
}

/** The client left before anything was answered. */
export const CLIENT_GONE: ForwardOutcome = Object.freeze({
  status: 499,
  upstreamStatus: undefined,
  replayed: false,
  result: 'client_closed',
});

/**
 * True once the client reset its stream or closed its connection. Checked after every wait: a
 * `close` that fired while the forwarder awaited the token or a stage has no listener to see it.
 */
export function clientGone(req: ClientRequest, res: ClientResponse): boolean {
  return closesWithClient(res).destroyed || (!('stream' in res) && req.socket.destroyed);
}

/**
 * Resolves as `pending` does, or with undefined as soon as the client resets its stream or closes
 * its connection (a listener only on this slow path: the common path awaits nothing).
 */
export function unlessClientGone<T>(
  pending: Promise<T>,
  res: ClientResponse,
): Promise<T | undefined> {
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
