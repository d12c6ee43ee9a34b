/**
 * Answers from the cache and their marks: `Cache-Status` members (RFC 9211), `Age` (RFC 9111
 * §4.2.3), and what a client that left or asked with HEAD gets.
 */
import { describe, expect, it } from 'vitest';
import { exchangeView, FakeResponse } from '../../../test/helpers/exchange-view.js';
import { CLIENT_GONE } from '../outcome.js';
import type { StoredAnswer } from './entries.js';
import { hitMember, serveAnswer, withCacheStatus } from './serve.js';

const T0 = 1_767_225_600_000;

function answer(overrides: Partial<StoredAnswer> = {}): StoredAnswer {
  return {
    headers: { 'content-type': 'text/plain', 'content-length': '2' },
    body: Buffer.from('ok'),
    storedAt: T0,
    expiresAt: T0 + 60_000,
    staleIfErrorUntil: T0 + 60_000,
    staleWhileRevalidateUntil: T0 + 60_000,
    vary: [],
    varyValues: [],
    size: 100,
    ...overrides,
  };
}

describe('withCacheStatus', () => {
  it("appends the sidecar's member after the upstream's, nearest the client last", () => {
    expect(withCacheStatus(undefined, 'oauth-sidecar; hit')).toBe('oauth-sidecar; hit');
    expect(withCacheStatus('', 'oauth-sidecar; hit')).toBe('oauth-sidecar; hit');
    expect(withCacheStatus('cdn; hit', 'oauth-sidecar; hit')).toBe('cdn; hit, oauth-sidecar; hit');
    expect(withCacheStatus(['a; hit', 'b; fwd=miss'], 'm')).toBe('a; hit, b; fwd=miss, m');
  });
});

describe('hitMember', () => {
  it('a fresh hit is a plain hit', () => {
    expect(hitMember(answer(), T0 + 1_000)).toBe('oauth-sidecar; hit');
  });

  it('a stale answer says how stale (negative ttl), whether the API was asked and why', () => {
    const stale = answer({ expiresAt: T0 + 10_000 });
    expect(
      hitMember(stale, T0 + 12_500, { detail: 'stale-while-revalidate', forwarded: false }),
    ).toBe('oauth-sidecar; hit; ttl=-3; detail=stale-while-revalidate');
    expect(
      hitMember(stale, T0 + 10_000, { detail: 'stale-if-error', forwarded: true, status: 503 }),
    ).toBe('oauth-sidecar; hit; ttl=-1; fwd=stale; fwd-status=503; detail=stale-if-error');
  });
});

describe('serveAnswer', () => {
  it("answers 200 with the entry's headers, its Age, the member and this request's id", () => {
    const exchange = exchangeView({ url: '/a', requestId: 'req-7' });
    const stored = answer({ headers: { 'content-length': '2', 'cache-status': 'api; hit' } });
    const outcome = serveAnswer(stored, exchange, 'oauth-sidecar; hit', T0 + 2_999);
    expect(outcome).toMatchObject({ status: 200, result: 'complete', upstreamStatus: undefined });
    const res = exchange.fake;
    expect(res.status).toBe(200);
    expect(res.body).toBe('ok');
    expect(res.headers).toMatchObject({
      age: '2',
      'cache-status': 'api; hit, oauth-sidecar; hit',
      'x-request-id': 'req-7',
      'content-length': '2',
    });
    expect(res.headers['keep-alive']).toBeUndefined();
  });

  it('HEAD gets the head alone; a keep-alive decision is advertised', () => {
    const res = new FakeResponse();
    const exchange = {
      ...exchangeView({ url: '/a', method: 'HEAD' }, res),
      keepAlive: 'timeout=5',
    };
    serveAnswer(answer(), exchange, 'oauth-sidecar; hit', T0);
    expect(res.headers).toMatchObject({ 'keep-alive': 'timeout=5', age: '0' });
    expect(res.body).toBe('');
    expect(res.writableFinished).toBe(true);
  });

  it('a client that left gets nothing', () => {
    const exchange = exchangeView({ url: '/a' });
    exchange.fake.leave();
    expect(serveAnswer(answer(), exchange, 'oauth-sidecar; hit', T0)).toBe(CLIENT_GONE);
    expect(exchange.fake.headersSent).toBe(false);
  });
});
