import { describe, expect, it } from 'vitest';
import { clientResponseHeaders, upstreamRequestHeaders } from './headers.js';

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

  it('puts the bearer first however many fields the client sends (never past the upstream header limit)', () => {
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
