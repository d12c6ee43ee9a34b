import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import {
  AnswerHead,
  parseRawHeaders,
  clientResponseHeaders,
  connectionListed,
  rawClientResponseHeaders,
  upstreamRequestHeaders,
} from './headers.js';

function pairs(flat: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
  return out;
}

const options = { host: 'api.example:8443', accessToken: 'tok-1', requestId: 'req-1' };

describe('upstreamRequestHeaders', () => {
  it('replaces credentials, Host and the request id; keeps the rest in order', () => {
    const out = pairs(
      upstreamRequestHeaders(
        [
          'Host',
          'localhost:8080',
          'Authorization',
          'Bearer client-token',
          'Proxy-Authorization',
          'Basic abc',
          'Accept',
          'text/csv',
          'X-Custom',
          'a',
          'X-Custom',
          'b',
          'X-Request-Id',
          'client-id',
          'Content-Length',
          '5',
        ],
        options,
      ),
    );
    expect(out).toEqual([
      ['authorization', 'Bearer tok-1'],
      ['host', 'api.example:8443'],
      ['x-request-id', 'req-1'],
      ['Accept', 'text/csv'],
      ['X-Custom', 'a'],
      ['X-Custom', 'b'],
      ['Content-Length', '5'],
    ]);
  });

  it('drops hop-by-hop fields and every field named in Connection (RFC 9110 §7.6.1)', () => {
    const out = upstreamRequestHeaders(
      [
        'Connection',
        'keep-alive, X-Foo',
        'connection',
        ' x-bar ',
        'X-Foo',
        '1',
        'x-bar',
        '2',
        'Keep-Alive',
        'timeout=5',
        'TE',
        'trailers',
        'Transfer-Encoding',
        'chunked',
        'Upgrade',
        'websocket',
        'Proxy-Connection',
        'keep-alive',
        'X-Keep',
        'yes',
      ],
      options,
    );
    const names = pairs(out).map(([name]) => name.toLowerCase());
    expect(names).toEqual(['authorization', 'host', 'x-request-id', 'x-keep']);
  });

  it('puts the bearer first however many fields the client sends (issue 8: a client pushed it past the upstream header limit)', () => {
    const many: string[] = [];
    for (let i = 0; i < 2000; i++) many.push(`X-Filler-${i}`, 'x');
    const out = upstreamRequestHeaders(many, options);
    expect(out.slice(0, 2)).toEqual(['authorization', 'Bearer tok-1']);
  });

  it('drops Via and X-Real-IP (no pod topology toward the third party)', () => {
    const out = upstreamRequestHeaders(
      ['Via', '1.1 gateway', 'X-Real-IP', '10.0.0.7', 'x-real-ip', '10.0.0.8', 'Accept', '*/*'],
      options,
    );
    expect(pairs(out).map(([name]) => name)).toEqual([
      'authorization',
      'host',
      'x-request-id',
      'Accept',
    ]);
  });

  it('sends no X-Forwarded-*, Forwarded or Expect', () => {
    const out = upstreamRequestHeaders(
      [
        'X-Forwarded-For',
        '10.0.0.1',
        'x-forwarded-proto',
        'http',
        'Forwarded',
        'for=1',
        'Expect',
        '100-continue',
      ],
      options,
    );
    expect(pairs(out).map(([name]) => name)).toEqual(['authorization', 'host', 'x-request-id']);
  });

  it('skips HTTP/2 pseudo-headers and rejoins cookie crumbs (RFC 9113 §8.2.3)', () => {
    const out = pairs(
      upstreamRequestHeaders(
        [':method', 'GET', ':path', '/v1.0/', ':authority', 'x', 'cookie', 'a=1', 'cookie', 'b=2'],
        options,
      ),
    );
    expect(out).toContainEqual(['cookie', 'a=1; b=2']);
    expect(out.some(([name]) => name.startsWith(':'))).toBe(false);
  });
});

describe('clientResponseHeaders', () => {
  it('drops hop-by-hop and Connection-listed fields, keeps repeated Set-Cookie', () => {
    const out = clientResponseHeaders(
      {
        connection: 'keep-alive, x-hop',
        'keep-alive': 'timeout=5',
        'transfer-encoding': 'chunked',
        upgrade: 'h2c',
        'proxy-connection': 'close',
        te: 'trailers',
        'x-hop': 'secret',
        'set-cookie': ['a=1', 'b=2'],
        'content-type': 'text/csv',
        'x-request-id': 'upstream-id',
        'x-end-to-end': 'kept',
      },
      'req-9',
    );
    expect(out).toEqual({
      'set-cookie': ['a=1', 'b=2'],
      'content-type': 'text/csv',
      'x-request-id': 'req-9',
      'x-end-to-end': 'kept',
    });
  });
});

/** An answer head as undici's parser hands it over: name, value, ... as Buffers, names as sent. */
function wire(...lines: [string, string][]): Buffer[] {
  return lines.flatMap(([name, value]) => [
    Buffer.from(name, 'latin1'),
    Buffer.from(value, 'latin1'),
  ]);
}

/** Field lines of either form, as node writes them: one [name, value] per line, sorted. */
function linesOf(headers: Record<string, string | string[] | number | undefined> | string[]) {
  const lines: string[][] = [];
  if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2) lines.push([headers[i]!, headers[i + 1]!]);
  } else {
    for (const [name, value] of Object.entries(headers)) {
      for (const one of Array.isArray(value) ? value : [value]) lines.push([name, String(one)]);
    }
  }
  return lines.sort((a, b) => (a.join(':') < b.join(':') ? -1 : 1));
}

describe('rawClientResponseHeaders (the same rules on the raw list)', () => {
  const cases: [string, Buffer[], number][] = [
    [
      'hop-by-hop, Connection-listed, repeated Set-Cookie, the upstream x-request-id',
      wire(
        ['Connection', 'keep-alive, X-Hop'],
        ['Keep-Alive', 'timeout=5'],
        ['Transfer-Encoding', 'chunked'],
        ['Upgrade', 'h2c'],
        ['Proxy-Connection', 'close'],
        ['TE', 'trailers'],
        ['X-Hop', 'secret'],
        ['Set-Cookie', 'a=1'],
        ['Set-Cookie', 'b=2'],
        ['Content-Type', 'text/csv'],
        ['X-Request-Id', 'upstream-id'],
        ['x-end-to-end', 'kept'],
      ),
      200,
    ],
    [
      'a 204 with Content-Length',
      wire(['Content-Length', '0'], ['Date', 'Mon, 23 Nov 2026 10:00:00 GMT']),
      204,
    ],
    [
      'two Connection fields, one plain keep-alive',
      wire(['Connection', 'keep-alive'], ['connection', 'x-a'], ['X-A', '1'], ['X-B', '2']),
      200,
    ],
    [
      'a typical answer',
      wire(
        ['content-type', 'application/json'],
        ['content-length', '2048'],
        ['connection', 'keep-alive'],
      ),
      200,
    ],
  ];
  it.each(cases)('%s: the lines node writes equal those of the object form', (_, raw, status) => {
    const require = createRequire(import.meta.url);
    // undici's public parse of the same list, as the controller API hands it to a handler.
    const { parseHeaders } = require('undici').util as {
      parseHeaders(h: Buffer[]): Record<string, string | string[]>;
    };
    const fromObject = clientResponseHeaders(parseHeaders(raw), 'req-9', status);
    const fromRaw = rawClientResponseHeaders(raw, 'req-9', status);
    expect(linesOf(fromRaw)).toEqual(linesOf(fromObject as Record<string, string | string[]>));
    expect(fromRaw.slice(-2)).toEqual(['x-request-id', 'req-9']);
  });

  it('keeps repeated fields as separate lines in the upstream order', () => {
    const out = rawClientResponseHeaders(
      wire(['Set-Cookie', 'a=1'], ['Vary', 'accept'], ['Set-Cookie', 'b=2']),
      'r',
    );
    expect(out).toEqual([
      'set-cookie',
      'a=1',
      'vary',
      'accept',
      'set-cookie',
      'b=2',
      'x-request-id',
      'r',
    ]);
  });
});

describe('AnswerHead', () => {
  it('parses the object only when asked, once, and keeps what a stage adds', () => {
    const head = new AnswerHead(
      wire(['Retry-After', '5'], ['Set-Cookie', 'a'], ['set-cookie', 'b']),
    );
    expect(head.parsed).toBe(false);
    const headers = head.headers;
    expect(head.parsed).toBe(true);
    expect(headers).toEqual({ 'retry-after': '5', 'set-cookie': ['a', 'b'] });
    headers['cache-status'] = 'sidecar; hit';
    expect(head.headers['cache-status']).toBe('sidecar; hit');
  });
});

describe('parseRawHeaders', () => {
  it('lower-cases names, makes repeats an array, and keeps a __proto__ field as a field', () => {
    const headers = parseRawHeaders(wire(['A', '1'], ['a', '2'], ['a', '3'], ['__proto__', 'x']));
    expect(headers.a).toEqual(['1', '2', '3']);
    expect(Object.getOwnPropertyDescriptor(headers, '__proto__')?.value).toBe('x');
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });
});

describe('connectionListed', () => {
  it('parses comma lists across several values, case-insensitively', () => {
    expect([...connectionListed(['Close, X-A', ' ,x-b,'])]).toEqual(['close', 'x-a', 'x-b']);
  });
});
