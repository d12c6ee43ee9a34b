/**
 * Which requests never read or write the cache (`bypassPlan`), and the `Cache-Status` member
 * each such plan carries (RFC 9211 `fwd=method`, `fwd=bypass`).
 */
import { describe, expect, it } from 'vitest';
import { exchangeView } from '../../../test/helpers/exchange-view.js';
import { hasNoBody, type ClientRequest } from '../request-body.js';
import { bypassPlan } from './plans.js';

function plan(method: string, headers: Record<string, string> = {}) {
  return bypassPlan(exchangeView({ url: '/v1/a', method, headers }), '/v1/a', 'none');
}

describe('bypassPlan', () => {
  it('a plain GET or HEAD goes on to the cache', () => {
    expect(plan('GET')).toBeUndefined();
    expect(plan('HEAD')).toBeUndefined();
    expect(plan('GET', { 'content-length': '0' })).toBeUndefined();
  });

  it('POST, PUT, PATCH and DELETE invalidate the path on success; other methods only pass', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      expect(plan(method)).toEqual({
        kind: 'unsafe',
        member: 'oauth-sidecar; fwd=method',
        path: '/v1/a',
      });
    }
    for (const method of ['OPTIONS', 'TRACE']) {
      expect(plan(method)).toEqual({
        kind: 'pass',
        member: 'oauth-sidecar; fwd=method',
        stale: undefined,
      });
    }
  });

  it('a GET with a body or a method override neither reads nor writes the cache', () => {
    const bypass = { kind: 'pass', member: 'oauth-sidecar; fwd=bypass', stale: undefined };
    expect(plan('GET', { 'content-length': '5' })).toEqual(bypass);
    expect(plan('GET', { 'transfer-encoding': 'chunked' })).toEqual(bypass);
    for (const name of ['x-http-method-override', 'x-http-method', 'x-method-override']) {
      expect(plan('GET', { [name]: 'DELETE' })).toEqual(bypass);
    }
  });

  it('a client asking for no-store bypasses; no-cache still reads through a fill', () => {
    const exchange = exchangeView({ url: '/v1/a' });
    expect(bypassPlan(exchange, '/v1/a', 'no-store')).toMatchObject({
      kind: 'pass',
      member: 'oauth-sidecar; fwd=bypass',
    });
    expect(bypassPlan(exchange, '/v1/a', 'no-cache')).toBeUndefined();
  });
});

describe('hasNoBody (what makes a GET tunnelled)', () => {
  const h1 = (headers: Record<string, string>) => ({ headers }) as unknown as ClientRequest;
  const h2 = (endAfterHeaders: boolean) =>
    ({ headers: {}, stream: { endAfterHeaders } }) as unknown as ClientRequest;

  it('HTTP/1.1: a body only with Content-Length above 0 or Transfer-Encoding (RFC 9112 §6.3)', () => {
    expect(hasNoBody(h1({}))).toBe(true);
    expect(hasNoBody(h1({ 'content-length': '0' }))).toBe(true);
    expect(hasNoBody(h1({ 'content-length': '1' }))).toBe(false);
    expect(hasNoBody(h1({ 'transfer-encoding': 'chunked' }))).toBe(false);
  });

  it('HTTP/2: a body unless the stream ended with its headers', () => {
    expect(hasNoBody(h2(true))).toBe(true);
    expect(hasNoBody(h2(false))).toBe(false);
  });
});
