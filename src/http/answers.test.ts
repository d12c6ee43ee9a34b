import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SidecarError } from '../errors.js';
import type { ClientResponse } from '../proxy/outcome.js';
import type { Logger } from '../telemetry/logger.js';
import {
  CLOSED_SOCKET_RELEASE_MS,
  answerError,
  type AnswerOptions,
  createClientErrorHandler,
  endAndRelease,
  envelopeAnswer,
} from './answers.js';

afterEach(() => {
  vi.useRealTimers();
});

/** Hand-made logger and metrics that keep what they were given. */
function recorders() {
  const counted: string[] = [];
  const logged: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  const line =
    (level: string) =>
    (fields: Record<string, unknown>, msg: string): void => {
      logged.push({ level, fields, msg });
    };
  const logger = {
    info: line('info'),
    warn: line('warn'),
    error: line('error'),
  } as unknown as Logger;
  const metrics = { proxyRejected: { inc: ({ code }: { code: string }) => counted.push(code) } };
  return { counted, logged, options: { logger, metrics } as unknown as AnswerOptions };
}

/** A hand-made node response that keeps its head and body. */
function response(started = false) {
  const res = {
    headersSent: started,
    destroyed: false,
    status: 0,
    headers: {} as Record<string, string>,
    body: '',
    writeHead(status: number, headers: Record<string, string>) {
      res.status = status;
      res.headers = headers;
    },
    end(body: string) {
      res.body = body;
    },
    destroy() {
      res.destroyed = true;
    },
  };
  return res;
}

describe('envelopeAnswer', () => {
  it('gives a SidecarError its status, envelope and the headers its code needs', () => {
    const refused = envelopeAnswer(new SidecarError('method_not_allowed', 'no TRACE'), 'req-1');
    expect(refused.status).toBe(405);
    expect(refused.headers.allow).toContain('GET');
    expect(refused.headers['x-request-id']).toBe('req-1');
    expect(refused.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(refused.body)).toEqual({
      errors: [{ code: 'method_not_allowed', detail: 'no TRACE' }],
      requestId: 'req-1',
    });
    const caller = envelopeAnswer(new SidecarError('caller_unauthenticated', 'who'), 'req-2');
    expect(caller.headers['www-authenticate']).toBe(
      'Bearer realm="oauth-sidecar", error="invalid_token"',
    );
    const later = envelopeAnswer(
      new SidecarError('rate_limited', 'slow down', {
        retryAfterSeconds: 7,
        fields: { ratelimit: 'x' },
      }),
      'req-3',
    );
    expect(later.headers['retry-after']).toBe('7');
    expect(later.headers.ratelimit).toBe('x');
  });

  it('answers anything else as a 500 that shows nothing of it', () => {
    const answer = envelopeAnswer(new Error('secret host db.internal'), 'req-4');
    expect(answer.status).toBe(500);
    expect(answer.body).not.toContain('db.internal');
  });
});

describe('answerError', () => {
  it('writes the envelope, counts the code, and logs the cause only', () => {
    const { counted, logged, options } = recorders();
    const res = response();
    const cause = new Error('connect ECONNREFUSED 10.0.0.9:443');
    const answered = answerError(
      res as unknown as ClientResponse,
      new SidecarError('upstream_unreachable', 'the upstream is unreachable', { cause }),
      'req-5',
      options,
      'timeout=65',
    );
    expect(answered).toEqual({ status: res.status, code: 'upstream_unreachable' });
    expect(res.headers['keep-alive']).toBe('timeout=65');
    expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.body)));
    expect(res.body).not.toContain('10.0.0.9');
    expect(counted).toEqual(['upstream_unreachable']);
    expect(logged).toEqual([
      { level: 'warn', fields: expect.objectContaining({ err: cause }), msg: expect.any(String) },
    ]);
  });

  it('closes the connection after a request timeout', () => {
    const res = response();
    answerError(
      res as unknown as ClientResponse,
      new SidecarError('request_timeout', 'too slow'),
      'req-6',
      recorders().options,
      'timeout=65',
    );
    expect(res.headers.connection).toBe('close');
    expect(res.headers['keep-alive']).toBeUndefined();
  });

  it('destroys a response already started instead of writing into it', () => {
    const res = response(true);
    answerError(res as unknown as ClientResponse, new Error('late'), 'req-7', recorders().options);
    expect(res.destroyed).toBe(true);
    expect(res.body).toBe('');
  });
});

describe('endAndRelease', () => {
  it('destroys the socket after the release time, read or not', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const socket = new PassThrough();
    endAndRelease(socket, 'bye');
    vi.advanceTimersByTime(CLOSED_SOCKET_RELEASE_MS - 1);
    expect(socket.destroyed).toBe(false);
    vi.advanceTimersByTime(1);
    expect(socket.destroyed).toBe(true);
  });
});

describe('createClientErrorHandler', () => {
  it.each([
    [
      'HPE_HEADER_OVERFLOW',
      'HTTP/1.1 431 Request Header Fields Too Large',
      'request_headers_too_large',
    ],
    ['ERR_HTTP_REQUEST_TIMEOUT', 'HTTP/1.1 408 Request Timeout', 'request_timeout'],
    ['HPE_INVALID_METHOD', 'HTTP/1.1 400 Bad Request', 'bad_request'],
  ])('answers %s with the envelope and Connection: close', (code, statusLine, errorCode) => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { counted, options } = recorders();
    const socket = new PassThrough();
    let written = '';
    socket.on('data', (chunk: Buffer) => (written += chunk.toString()));
    createClientErrorHandler(options)(Object.assign(new Error('parse'), { code }), socket);
    socket.read();
    expect(written.startsWith(`${statusLine}\r\n`)).toBe(true);
    expect(written).toContain('connection: close\r\n');
    expect(written).toContain(`"code":"${errorCode}"`);
    expect(counted).toEqual([errorCode]);
    vi.advanceTimersByTime(CLOSED_SOCKET_RELEASE_MS);
    expect(socket.destroyed).toBe(true);
  });

  it('drops a reset connection without an answer', () => {
    const { counted, options } = recorders();
    const socket = new PassThrough();
    createClientErrorHandler(options)(
      Object.assign(new Error('reset'), { code: 'ECONNRESET' }),
      socket,
    );
    expect(socket.destroyed).toBe(true);
    expect(counted).toEqual([]);
  });
});
