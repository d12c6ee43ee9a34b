/**
 * One POST to the token endpoint through the dispatcher's own dispatch API, with its answer read
 * whole up to a cap. Not undici's `fetch`: importing it loads undici's package index (fetch,
 * WebSocket, EventSource, cache stores, mock agents): idle RSS in every pod for one small request
 * every few minutes (docs/benchmarks.md "Footprint"). The global `fetch` would load
 * Node's bundled copy of the same code.
 *
 * What `fetch(url, { redirect: 'manual', signal })` did and this keeps: a redirect is never
 * followed (dispatch has no redirect handling: a 3xx comes back as is), and `signal` bounds
 * everything from connect to the last byte of the body. What this adds: the body is never
 * buffered past `maxBytes` (a declared larger content-length is not read at all).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { TokenEndpointError } from '../errors.js';
import { describeCause } from '../safe-text.js';

/** A token endpoint answer, its body already read (up to the cap). */
export interface TokenAnswer {
  readonly status: number;
  /** A header by lower-case name, repeated values joined with ", "; null when absent. */
  header(name: string): string | null;
  /** The body as UTF-8 text; empty when `tooLarge`. */
  readonly text: string;
  /** The body was larger than the cap (declared, or counted while reading): not read past it. */
  readonly tooLarge: boolean;
}

export function tokenAnswer(
  status: number,
  headers: IncomingHttpHeaders,
  text: string,
  tooLarge: boolean,
): TokenAnswer {
  return {
    status,
    header(name) {
      const value = headers[name];
      if (value === undefined) return null;
      return Array.isArray(value) ? value.join(', ') : value;
    },
    text,
    tooLarge,
  };
}

export interface PostRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Largest body read; a larger one ends the exchange as a `tooLarge` answer. */
  maxBytes: number;
  /** Bounds the whole exchange, connect to last byte. */
  signal: AbortSignal;
}

/**
 * Sends one POST and reads its answer. Rejects with the transport's error when no answer head
 * came, with `signal.reason` once `signal` aborts, and with a `network` TokenEndpointError (with
 * the status) when the connection failed while the body was read.
 */
export function postOnce(dispatcher: Dispatcher, request: PostRequest): Promise<TokenAnswer> {
  return sendOnce(dispatcher, 'POST', request);
}

/** A GET of a small document (the callers' JWKS and discovery document), read as `postOnce` reads. */
export type GetRequest = Omit<PostRequest, 'body'>;

export function getOnce(dispatcher: Dispatcher, request: GetRequest): Promise<TokenAnswer> {
  return sendOnce(dispatcher, 'GET', request);
}

function sendOnce(
  dispatcher: Dispatcher,
  method: 'GET' | 'POST',
  request: GetRequest & { body?: string },
): Promise<TokenAnswer> {
  return new Promise((resolve, reject) => {
    const { signal } = request;
    if (signal.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const exchange = new Exchange(request.maxBytes, (outcome) => {
      signal.removeEventListener('abort', onAbort);
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    });
    const onAbort = (): void => exchange.abort(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    const target = new URL(request.url);
    try {
      dispatcher.dispatch(
        {
          origin: target.origin,
          path: `${target.pathname}${target.search}`,
          method,
          headers: request.headers,
          body: request.body ?? null,
        },
        exchange,
      );
    } catch (error) {
      exchange.fail(error instanceof Error ? error : new Error(String(error)));
    }
  });
}

/** Too large: ends the exchange from this side once the answer is known to exceed the cap. */
class AnswerTooLarge extends Error {}

/** The dispatch handler: collects the answer and settles once. */
class Exchange implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | undefined;
  #settled = false;
  #status = 0;
  #headers: IncomingHttpHeaders = {};
  #chunks: Buffer[] = [];
  #bytes = 0;
  readonly #maxBytes: number;
  readonly #settle: (outcome: TokenAnswer | Error) => void;

  constructor(maxBytes: number, settle: (outcome: TokenAnswer | Error) => void) {
    this.#maxBytes = maxBytes;
    this.#settle = settle;
  }

  /** The deadline fired: settle with its reason now and stop undici's side of the exchange. */
  abort(reason: Error): void {
    if (this.#settled) return;
    this.fail(reason);
    // Before onRequestStart there is no controller yet; it aborts there (below).
    this.#controller?.abort(reason);
  }

  fail(error: Error): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#chunks = [];
    this.#settle(error);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#settled) controller.abort(new Error('token request abandoned before it was sent'));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (statusCode < 200 || this.#settled) return;
    this.#status = statusCode;
    this.#headers = headers;
    const declared = Number(headers['content-length'] ?? '');
    if (declared > this.#maxBytes) this.#tooLarge(controller);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled) return;
    this.#bytes += chunk.length;
    if (this.#bytes > this.#maxBytes) {
      this.#tooLarge(controller);
      return;
    }
    this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    this.#settled = true;
    // TextDecoder, as fetch's `text()`: a leading BOM is dropped, invalid bytes become U+FFFD.
    const text = new TextDecoder().decode(Buffer.concat(this.#chunks, this.#bytes));
    this.#chunks = [];
    this.#settle(tokenAnswer(this.#status, this.#headers, text, false));
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.#settled) return;
    if (this.#status === 0) {
      this.fail(error);
      return;
    }
    this.fail(
      new TokenEndpointError(
        'network',
        `token endpoint answer: connection failed while reading the body: ${describeCause(error)}`,
        { status: this.#status, cause: error },
      ),
    );
  }

  /** Settle as too large and stop reading: the connection is dropped rather than drained. */
  #tooLarge(controller: Dispatcher.DispatchController): void {
    this.#settled = true;
    this.#chunks = [];
    this.#settle(tokenAnswer(this.#status, this.#headers, '', true));
    controller.abort(new AnswerTooLarge(`answer larger than ${this.#maxBytes} bytes`));
  }
}
