/**
 * The background request that refreshes a stale entry while it answers (RFC 5861
 * stale-while-revalidate): an exchange of the cache's own, sent through the whole request path
 * (quota guard, token, upstream, 401 replay, metrics) as the entry's first request was, whose
 * answer only the cache's capture reads.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { Exchange } from '../exchange.js';
import type { ExchangeView, Forward } from '../stages.js';
import type { Flight } from './flights.js';

/** Background refreshes in progress at once; beyond it a stale entry answers without one. */
export const MAX_REFRESHES = 64;

/**
 * Request fields a refresh does not repeat: it goes upstream whatever the first one asked, under
 * its own request id, in no caller's trace, and without a body.
 */
const NOT_REPEATED = new Set([
  'cache-control',
  'pragma',
  'x-request-id',
  'traceparent',
  'tracestate',
  'content-length',
  'transfer-encoding',
]);

/**
 * The client side of a refresh: a sink that takes the answer at any pace (the capture owns it),
 * with the two calls of node's response the forwarder makes besides a Writable's.
 */
class RefreshResponse extends Writable {
  statusCode = 0;
  headersSent = false;

  constructor() {
    super({
      write: (_chunk, _encoding, done) => done(),
    });
  }

  writeHead(status: number): this {
    this.statusCode = status;
    this.headersSent = true;
    return this;
  }

  setHeader(): this {
    return this;
  }
}

/**
 * An exchange for a GET of `target` with the fields of the request that found the entry stale
 * (its `Accept`, `Accept-Encoding` and the fields `Vary` selects, as a miss would have sent them).
 */
export function refreshExchange(
  target: string,
  rawHeaders: readonly string[],
  requestId: string,
): Exchange {
  const fields: string[] = [];
  const headers: Record<string, string> = {};
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (NOT_REPEATED.has(lower)) continue;
    fields.push(name, rawHeaders[i + 1]!);
    headers[lower] =
      headers[lower] === undefined ? rawHeaders[i + 1]! : `${headers[lower]}, ${rawHeaders[i + 1]}`;
  }
  // The forwarder reads a request's method, target, fields and socket, and (none here) its body.
  const req = {
    method: 'GET',
    url: target,
    headers,
    rawHeaders: fields,
    socket: { destroyed: false },
  };
  const res = new RefreshResponse();
  return new Exchange(
    req as unknown as IncomingMessage,
    res as unknown as ServerResponse,
    requestId,
  );
}

/** The refreshes in progress: at most one per key, {@link MAX_REFRESHES} in all. */
export class Refreshes {
  /** The refresh exchanges, with the fleet's fill lease each holds (if any). */
  readonly #exchanges = new WeakMap<ExchangeView, Flight['lease']>();
  readonly #keys = new Set<string>();
  #forward: Forward | undefined;

  attach(forward: Forward): void {
    this.#forward = forward;
  }

  get size(): number {
    return this.#keys.size;
  }

  isRefresh(exchange: ExchangeView): boolean {
    return this.#exchanges.has(exchange);
  }

  leaseOf(exchange: ExchangeView): Flight['lease'] {
    return this.#exchanges.get(exchange);
  }

  /**
   * Refresh `key` with the request that found it stale, unless one is on its way (or too many
   * are). True: the refresh took `lease` over.
   */
  start(key: string, exchange: ExchangeView, lease: Flight['lease']): boolean {
    const forward = this.#forward;
    if (forward === undefined || this.#keys.has(key) || this.#keys.size >= MAX_REFRESHES) {
      return false;
    }
    const background = refreshExchange(exchange.target, exchange.req.rawHeaders, randomUUID());
    this.#exchanges.set(background, lease);
    this.#keys.add(key);
    void forward(background)
      .catch(() => undefined)
      .finally(() => {
        this.#keys.delete(key);
        // No error handler answers a refresh: closing its response ends its fill either way
        // (else a refresh refused before any answer would leave a fill for others to wait on).
        background.res.destroy();
      });
    return true;
  }
}
