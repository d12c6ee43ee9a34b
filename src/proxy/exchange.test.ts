/**
 * The one object a proxied request is, from admission to the request line: what it keeps of the
 * client's request, when its client is gone, and how long it stays counted.
 */
import { describe, expect, it } from 'vitest';
import { Exchange } from './exchange.js';
import type { ClientResponse } from './outcome.js';
import type { ClientRequest } from './request-body.js';

function exchangeOf(request: { method?: string; url?: string } = {}) {
  const socket = { destroyed: false };
  const res = { destroyed: false };
  const req = { ...request, socket };
  const exchange = new Exchange(
    req as unknown as ClientRequest,
    res as unknown as ClientResponse,
    'req-1',
    'timeout=65',
  );
  return { exchange, socket, res };
}

describe('Exchange', () => {
  it("keeps the client's method and target as sent (GET / when node has none)", () => {
    const { exchange } = exchangeOf({ method: 'PATCH', url: '/v1.0/a?b=%2F' });
    expect([exchange.method, exchange.target, exchange.requestId, exchange.keepAlive]).toEqual([
      'PATCH',
      '/v1.0/a?b=%2F',
      'req-1',
      'timeout=65',
    ]);
    expect([exchangeOf().exchange.method, exchangeOf().exchange.target]).toEqual(['GET', '/']);
    expect(exchange.attempts).toBe(0);
  });

  it('is client-gone once its response or (HTTP/1.1) its socket is destroyed', () => {
    const one = exchangeOf();
    expect(one.exchange.clientGone()).toBe(false);
    one.socket.destroyed = true;
    expect(one.exchange.clientGone()).toBe(true);
    const two = exchangeOf();
    two.res.destroyed = true;
    expect(two.exchange.clientGone()).toBe(true);
  });

  it('stays held until every promise it was given settles', async () => {
    const { exchange } = exchangeOf();
    expect(exchange.held).toBeUndefined();
    let first!: () => void;
    let second!: () => void;
    exchange.hold(new Promise<void>((resolve) => (first = resolve)));
    exchange.hold(new Promise<void>((resolve) => (second = resolve)));
    let released = false;
    const held = exchange.held?.then(() => (released = true));
    first();
    await Promise.resolve();
    await Promise.resolve();
    expect(released).toBe(false);
    second();
    await held;
    expect(released).toBe(true);
  });
});
