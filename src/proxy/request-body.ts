import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { Readable } from 'node:stream';
import type { Clock } from '../clock.js';
import { OutcomeError, SidecarError } from '../errors.js';

/** Bodies up to this size are buffered, so a request that met a 401 can be replayed (docs/design.md "Token keeper"). */
export const REPLAY_BUFFER_BYTES = 64 * 1024;

export type ClientRequest = IncomingMessage | Http2ServerRequest;

/** A request body as it will be sent upstream. Only `none` and `buffered` can be sent twice. */
export type PreparedBody =
  { kind: 'none' } | { kind: 'buffered'; data: Buffer } | { kind: 'stream'; prefix: Buffer[] };

/** The client went away while its body was being read; nothing is left to answer. */
export class ClientGoneError extends OutcomeError {
  constructor() {
    super('client closed the connection before its request body was read');
    this.name = 'ClientGoneError';
  }
}

/** `proxy.bodyTimeoutMs`: the longest pause inside a request body, and the clock that times it. */
export interface BodyTimeout {
  ms: number;
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
}

export function requestTimeoutError(ms: number): SidecarError {
  return new SidecarError('request_timeout', `the request body paused for longer than ${ms} ms`);
}

function isHttp2(req: ClientRequest): req is Http2ServerRequest {
  return 'stream' in req && typeof req.stream === 'object';
}

/** RFC 9112 §6.3: an HTTP/1.1 request has a body only with Content-Length or Transfer-Encoding. */
function mayHaveBody(req: ClientRequest): boolean {
  if (isHttp2(req)) return !req.stream.endAfterHeaders;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function declaredLength(req: ClientRequest): number | undefined {
  const value = req.headers['content-length'];
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
}

/** Read until the body ends or more than `limit` bytes arrived, then pause the rest. */
function readUpTo(
  req: ClientRequest,
  limit: number,
  timeout: BodyTimeout,
): Promise<{ chunks: Buffer[]; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const { clock } = timeout;
    const onStall = () => {
      cleanup();
      req.pause();
      reject(requestTimeoutError(timeout.ms));
    };
    let timer = clock.setTimeout(onStall, timeout.ms);
    const cleanup = () => {
      clock.clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onGone);
    };
    const onData = (chunk: Buffer) => {
      clock.clearTimeout(timer);
      timer = clock.setTimeout(onStall, timeout.ms);
      chunks.push(chunk);
      size += chunk.length;
      if (size > limit) {
        req.pause();
        cleanup();
        resolve({ chunks, ended: false });
      }
    };
    const onEnd = () => {
      cleanup();
      resolve({ chunks, ended: true });
    };
    const onGone = () => {
      cleanup();
      reject(new ClientGoneError());
    };
    if (req.readableEnded) {
      clock.clearTimeout(timer);
      resolve({ chunks, ended: true });
      return;
    }
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onGone);
    req.on('close', onGone);
  });
}

export const NO_BODY: PreparedBody = Object.freeze({ kind: 'none' });

/** True when the request cannot carry a body: nothing to read, nothing to time. */
export function hasNoBody(req: ClientRequest): boolean {
  return !mayHaveBody(req);
}

/**
 * Decide how the body goes upstream: none, buffered (small, replayable) or streamed (large or of
 * unknown size past `limit`). Only reads ahead when the body may fit in `limit`.
 */
export async function prepareBody(
  req: ClientRequest,
  limit: number,
  timeout: BodyTimeout,
): Promise<PreparedBody> {
  if (!mayHaveBody(req)) return NO_BODY;
  const length = declaredLength(req);
  if (length !== undefined && length > limit) return { kind: 'stream', prefix: [] };
  const { chunks, ended } = await readUpTo(req, limit, timeout);
  if (ended) return { kind: 'buffered', data: Buffer.concat(chunks) };
  return { kind: 'stream', prefix: chunks };
}

/**
 * The body for undici. A stream is wrapped rather than handed over: undici destroys a failed
 * body, and destroying the client's request would destroy its socket before the 502 is written.
 */
export function upstreamBody(
  req: ClientRequest,
  body: PreparedBody,
  timeout: BodyTimeout,
  onStall: () => void,
): Buffer | Readable | null {
  switch (body.kind) {
    case 'none':
      return null;
    case 'buffered':
      return body.data;
    case 'stream': {
      const prefix = body.prefix;
      const { clock, ms } = timeout;
      async function* chunks(): AsyncGenerator<Buffer> {
        yield* prefix;
        // destroyOnReturn: false — stopping early (upstream failed) must leave the client socket alone.
        const rest = req.iterator({ destroyOnReturn: false })[Symbol.asyncIterator]();
        for (;;) {
          let timer: ReturnType<typeof clock.setTimeout> | undefined;
          const stalled = new Promise<never>((_, reject) => {
            timer = clock.setTimeout(() => {
              onStall();
              reject(requestTimeoutError(ms));
            }, ms);
          });
          try {
            const next = (await Promise.race([rest.next(), stalled])) as IteratorResult<Buffer>;
            if (next.done === true) return;
            yield next.value;
          } finally {
            if (timer !== undefined) clock.clearTimeout(timer);
          }
        }
      }
      return Readable.from(chunks(), { objectMode: false });
    }
  }
}
