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
  | { kind: 'none' }
  | { kind: 'buffered'; data: Buffer }
  | { kind: 'stream'; prefix: Buffer[]; pace: BodyPace };

/** The client went away while its body was being read; nothing is left to answer. */
export class ClientGoneError extends OutcomeError {
  constructor() {
    super('client closed the connection before its request body was read');
    this.name = 'ClientGoneError';
  }
}

/**
 * `proxy.bodyTimeoutMs`, the longest pause inside a request body; `proxy.minBodyBytesPerSecond`,
 * the slowest average it may arrive at after {@link MIN_RATE_GRACE_MS} (0: off); the clock.
 */
export interface BodyTimeout {
  ms: number;
  minBytesPerSecond?: number;
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout' | 'now'>;
}

/** The average rate is judged from this long after the body began (Apache mod_reqtimeout's way). */
export const MIN_RATE_GRACE_MS = 10_000;

export function requestTimeoutError(ms: number): SidecarError {
  return new SidecarError('request_timeout', `the request body paused for longer than ${ms} ms`);
}

function tooSlowError(minBytesPerSecond: number): SidecarError {
  return new SidecarError(
    'request_timeout',
    `the request body arrived slower than ${minBytesPerSecond} bytes per second`,
  );
}

/**
 * How far one request body has come: when it must show progress next. A trickle that resets the
 * pause timer every few seconds still falls below the minimum average and ends.
 */
class BodyPace {
  readonly #startedAt: number;
  #bytes = 0;
  constructor(readonly timeout: BodyTimeout) {
    this.#startedAt = timeout.clock.now();
  }

  received(bytes: number): void {
    this.#bytes += bytes;
  }

  /** Milliseconds until the body counts as stalled, and the error it then ends with. */
  next(): { ms: number; error: () => SidecarError } {
    const { ms, minBytesPerSecond: min = 0 } = this.timeout;
    if (min > 0) {
      const due = this.#startedAt + Math.max(MIN_RATE_GRACE_MS, (this.#bytes / min) * 1000);
      const left = due - this.timeout.clock.now();
      if (left < ms) return { ms: Math.max(0, left), error: () => tooSlowError(min) };
    }
    return { ms, error: () => requestTimeoutError(ms) };
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
  pace: BodyPace,
): Promise<{ chunks: Buffer[]; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const { clock } = pace.timeout;
    let due = pace.next();
    const onStall = () => {
      cleanup();
      req.pause();
      reject(due.error());
    };
    let timer = clock.setTimeout(onStall, due.ms);
    const cleanup = () => {
      clock.clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onGone);
    };
    const onData = (chunk: Buffer) => {
      clock.clearTimeout(timer);
      pace.received(chunk.length);
      due = pace.next();
      timer = clock.setTimeout(onStall, due.ms);
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
  const pace = new BodyPace(timeout);
  const length = declaredLength(req);
  if (length !== undefined && length > limit) return { kind: 'stream', prefix: [], pace };
  const { chunks, ended } = await readUpTo(req, limit, pace);
  if (ended) return { kind: 'buffered', data: Buffer.concat(chunks) };
  return { kind: 'stream', prefix: chunks, pace };
}

/**
 * The body for undici. A stream is wrapped rather than handed over: undici destroys a failed
 * body, and destroying the client's request would destroy its socket before the 502 is written.
 */
export function upstreamBody(
  req: ClientRequest,
  body: PreparedBody,
  onStall: () => void,
): Buffer | Readable | null {
  switch (body.kind) {
    case 'none':
      return null;
    case 'buffered':
      return body.data;
    case 'stream': {
      const { prefix, pace } = body;
      const { clock } = pace.timeout;
      async function* chunks(): AsyncGenerator<Buffer> {
        yield* prefix;
        // destroyOnReturn: false — stopping early (upstream failed) must leave the client socket alone.
        const rest = req.iterator({ destroyOnReturn: false })[Symbol.asyncIterator]();
        for (;;) {
          let timer: ReturnType<typeof clock.setTimeout> | undefined;
          const due = pace.next();
          const stalled = new Promise<never>((_, reject) => {
            timer = clock.setTimeout(() => {
              onStall();
              reject(due.error());
            }, due.ms);
          });
          try {
            const next = (await Promise.race([rest.next(), stalled])) as IteratorResult<Buffer>;
            if (next.done === true) return;
            pace.received(next.value.length);
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
