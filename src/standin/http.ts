/** Small helpers shared by the token endpoint and the API routes; HTTP/1.1 and HTTP/2 alike. */
import { createHash } from 'node:crypto';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { constants as h2, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { Clock, TimerHandle } from '../clock.js';

export type Req = IncomingMessage | Http2ServerRequest;
export type Res = ServerResponse | Http2ServerResponse;

/** The part of a response both protocol flavours share, typed once. */
export interface Out {
  readonly headersSent: boolean;
  setHeader(name: string, value: string | string[] | number): unknown;
  writeHead(status: number, headers?: OutgoingHttpHeaders): unknown;
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): unknown;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  off(event: 'drain' | 'close', listener: () => void): unknown;
}

export function out(res: Res): Out {
  return res as unknown as Out;
}

export function isHttp2(req: Req): req is Http2ServerRequest {
  return req.httpVersionMajor === 2;
}

/** Abort without an answer: the TCP socket on HTTP/1.1, only this stream (RST_STREAM) on HTTP/2. */
export function resetRequest(req: Req): void {
  if (isHttp2(req)) req.stream.close(h2.NGHTTP2_INTERNAL_ERROR);
  else req.socket.destroy();
}

export function sendJson(
  res: Res,
  status: number,
  body: unknown,
  headers: OutgoingHttpHeaders = {},
): void {
  const text = body === undefined ? '' : JSON.stringify(body);
  const o = out(res);
  o.writeHead(status, {
    ...(text === '' ? {} : { 'content-type': 'application/json; charset=utf-8' }),
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  o.end(text);
}

/** The API's own error envelope (docs/api-notes.md §7: `{"errors":[{code,detail}]}`). */
export function envelope(
  code: string,
  detail: string,
): { errors: { code: string; detail: string }[] } {
  return { errors: [{ code, detail }] };
}

/** Read a small body whole; stops keeping bytes past `limit` but still drains the stream. */
export async function readSmallBody(
  req: Req,
  limit: number,
): Promise<{ body: Buffer; tooLarge: boolean } | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  let tooLarge = false;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) tooLarge = true;
      else chunks.push(chunk);
    }
  } catch {
    return undefined; // the client went away
  }
  return { body: Buffer.concat(chunks), tooLarge };
}

/** Hash a body of any size as it streams by; nothing is buffered. */
export async function hashBody(req: Req): Promise<{ bytes: number; sha256: string } | undefined> {
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      hash.update(chunk);
    }
  } catch {
    return undefined;
  }
  return { bytes, sha256: hash.digest('hex') };
}

/**
 * Timers that die with their response and with the server, so close() never waits on a
 * slow route or a delayed token answer.
 */
export class Timers {
  private readonly pending = new Set<TimerHandle>();

  constructor(private readonly clock: Clock) {}

  /** Run `fn` after `ms` unless the response closes first. */
  after(ms: number, res: Res, fn: () => void): void {
    const o = out(res);
    const onClose = (): void => {
      this.clock.clearTimeout(handle);
      this.pending.delete(handle);
    };
    const handle = this.clock.setTimeout(() => {
      this.pending.delete(handle);
      o.off('close', onClose);
      fn();
    }, ms);
    this.pending.add(handle);
    o.once('close', onClose);
  }

  clearAll(): void {
    for (const handle of this.pending) this.clock.clearTimeout(handle);
    this.pending.clear();
  }
}

/**
 * Stream `total` bytes in pieces of at most `chunk.length`, waiting for 'drain' whenever the
 * socket is full, then end with `tail`. Stops quietly when the client goes away.
 */
export function streamBytes(res: Res, total: number, chunk: Buffer, tail?: Buffer): void {
  const o = out(res);
  let remaining = total;
  let closed = false;
  const onClose = (): void => {
    closed = true;
  };
  o.once('close', onClose);
  const pump = (): void => {
    while (!closed && remaining > 0) {
      const n = Math.min(remaining, chunk.length);
      remaining -= n;
      if (!o.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
        o.once('drain', pump);
        return;
      }
    }
    if (!closed) {
      o.off('close', onClose);
      o.end(tail);
    }
  };
  pump();
}
