import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { Readable } from 'node:stream';
import type { Clock } from '../clock.js';
import { OutcomeError, SidecarError } from '../errors.js';

/** Bodies up to this size are buffered, so a request that met a 401 can be replayed (docs/design.md "Token keeper"). */
export const REPLAY_BUFFER_BYTES = 64 * 1024;

export type ClientRequest = IncomingMessage | Http2ServerRequest;

/**
 * A request body as it will be sent upstream. Only `none` and `buffered` can be sent twice. A
 * stream remembers when its reading began (`startedAt`, the clock's `now`) for the minimum rate.
 */
export type PreparedBody =
  | { kind: 'none' }
  | { kind: 'buffered'; data: Buffer }
  | { kind: 'stream'; prefix: Buffer[]; startedAt: number };

/** The client went away while its body was being read; nothing is left to answer. */
export class ClientGoneError extends OutcomeError {
  constructor() {
    super('client closed the connection before its request body was read');
    this.name = 'ClientGoneError';
  }
}

/**
 * How long a request body may take: `proxy.bodyTimeoutMs`, the longest pause inside it, and
 * `proxy.minBodyBytesPerSecond`, the slowest average it may arrive at once its first
 * MIN_RATE_GRACE_MS have passed (Apache mod_reqtimeout's `MinRate`); and the clock that times both.
 */
export interface BodyTimeout {
  ms: number;
  /** 0 (or absent): no minimum rate. */
  minBytesPerSecond?: number;
  clock: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;
}

/** A body is not judged on its average rate before this much of it has passed. */
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
 * The delay for the body's one timer after `received` bytes since `startedAt`: the pause limit,
 * or sooner the moment the average would fall below the minimum rate (the same timer serves
 * both, re-aimed at each chunk as before: no second timer per request).
 */
function bodyTimerDelay(timeout: BodyTimeout, startedAt: number, received: number): number {
  const rate = timeout.minBytesPerSecond ?? 0;
  if (rate <= 0) return timeout.ms;
  const rateDeadline = startedAt + Math.max(MIN_RATE_GRACE_MS, (received * 1000) / rate);
  return Math.max(1, Math.min(timeout.ms, rateDeadline - timeout.clock.now()));
}

/** The 408 for a body timer that fired: too slow on average, or paused too long. */
function bodyTimeoutError(timeout: BodyTimeout, startedAt: number, received: number): SidecarError {
  const rate = timeout.minBytesPerSecond ?? 0;
  if (rate > 0) {
    const elapsed = timeout.clock.now() - startedAt;
    if (elapsed >= MIN_RATE_GRACE_MS && (received * 1000) / elapsed < rate) {
      return tooSlowError(rate);
    }
  }
  return requestTimeoutError(timeout.ms);
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
): Promise<{ chunks: Buffer[]; ended: boolean; startedAt: number }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const { clock } = timeout;
    const startedAt = clock.now();
    const onStall = () => {
      cleanup();
      req.pause();
      reject(bodyTimeoutError(timeout, startedAt, size));
    };
    let timer = clock.setTimeout(onStall, bodyTimerDelay(timeout, startedAt, size));
    const cleanup = () => {
      clock.clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onGone);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      clock.clearTimeout(timer);
      timer = clock.setTimeout(onStall, bodyTimerDelay(timeout, startedAt, size));
      if (size > limit) {
        req.pause();
        cleanup();
        resolve({ chunks, ended: false, startedAt });
      }
    };
    const onEnd = () => {
      cleanup();
      resolve({ chunks, ended: true, startedAt });
    };
    const onGone = () => {
      cleanup();
      reject(new ClientGoneError());
    };
    if (req.readableEnded) {
      clock.clearTimeout(timer);
      resolve({ chunks, ended: true, startedAt });
      return;
    }
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onGone);
    req.on('close', onGone);
  });
}

export const NO_BODY: PreparedBody = Object.freeze({ kind: 'none' });

/**
 * Take a slot of `slots` while the request's body arrives: given back when the body has ended or
 * the request has closed, whichever comes first, or earlier through the returned function.
 * Undefined when `slots` is full (the caller answers 503 `overloaded`).
 */
export function holdWhileBodyArrives(
  req: ClientRequest,
  slots: { tryAcquire(): boolean; release(): void },
): (() => void) | undefined {
  if (!slots.tryAcquire()) return undefined;
  let held = true;
  const release = (): void => {
    if (!held) return;
    held = false;
    req.off('end', release);
    req.off('close', release);
    req.off('error', release);
    slots.release();
  };
  req.once('end', release);
  req.once('close', release);
  req.once('error', release);
  return release;
}

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
  if (length !== undefined && length > limit) {
    return { kind: 'stream', prefix: [], startedAt: timeout.clock.now() };
  }
  const { chunks, ended, startedAt } = await readUpTo(req, limit, timeout);
  if (ended) return { kind: 'buffered', data: Buffer.concat(chunks) };
  return { kind: 'stream', prefix: chunks, startedAt };
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
      const { prefix, startedAt } = body;
      const { clock } = timeout;
      let received = 0;
      for (const chunk of prefix) received += chunk.length;
      async function* chunks(): AsyncGenerator<Buffer> {
        yield* prefix;
        // destroyOnReturn: false — stopping early (upstream failed) must leave the client socket alone.
        const rest = req.iterator({ destroyOnReturn: false })[Symbol.asyncIterator]();
        for (;;) {
          let timer: ReturnType<typeof clock.setTimeout> | undefined;
          const stalled = new Promise<never>((_, reject) => {
            timer = clock.setTimeout(
              () => {
                onStall();
                reject(bodyTimeoutError(timeout, startedAt, received));
              },
              bodyTimerDelay(timeout, startedAt, received),
            );
          });
          try {
            const next = (await Promise.race([rest.next(), stalled])) as IteratorResult<Buffer>;
            if (next.done === true) return;
            received += next.value.length;
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
