import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { Readable } from 'node:stream';

/** Bodies up to this size are buffered, so a request that met a 401 can be replayed (docs/design.md "Token keeper"). */
export const REPLAY_BUFFER_BYTES = 64 * 1024;

export type ClientRequest = IncomingMessage | Http2ServerRequest;

/** A request body as it will be sent upstream. Only `none` and `buffered` can be sent twice. */
export type PreparedBody =
  { kind: 'none' } | { kind: 'buffered'; data: Buffer } | { kind: 'stream'; prefix: Buffer[] };

/** The client went away while its body was being read; nothing is left to answer. */
export class ClientGoneError extends Error {
  constructor() {
    super('client closed the connection before its request body was read');
    this.name = 'ClientGoneError';
  }
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
): Promise<{ chunks: Buffer[]; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onGone);
    };
    const onData = (chunk: Buffer) => {
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
      resolve({ chunks, ended: true });
      return;
    }
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onGone);
    req.on('close', onGone);
  });
}

/**
 * Decide how the body goes upstream: none, buffered (small, replayable) or streamed (large or of
 * unknown size past `limit`). Only reads ahead when the body may fit in `limit`.
 */
export async function prepareBody(
  req: ClientRequest,
  limit = REPLAY_BUFFER_BYTES,
): Promise<PreparedBody> {
  if (!mayHaveBody(req)) return { kind: 'none' };
  const length = declaredLength(req);
  if (length !== undefined && length > limit) return { kind: 'stream', prefix: [] };
  const { chunks, ended } = await readUpTo(req, limit);
  if (ended) return { kind: 'buffered', data: Buffer.concat(chunks) };
  return { kind: 'stream', prefix: chunks };
}

/**
 * The body for undici. A stream is wrapped rather than handed over: undici destroys a failed
 * body, and destroying the client's request would destroy its socket before the 502 is written.
 */
export function upstreamBody(req: ClientRequest, body: PreparedBody): Buffer | Readable | null {
  switch (body.kind) {
    case 'none':
      return null;
    case 'buffered':
      return body.data;
    case 'stream': {
      const prefix = body.prefix;
      async function* chunks(): AsyncGenerator<Buffer> {
        yield* prefix;
        // destroyOnReturn: false — stopping early (upstream failed) must leave the client socket alone.
        const rest = req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>;
        for await (const chunk of rest) yield chunk;
      }
      return Readable.from(chunks(), { objectMode: false });
    }
  }
}
