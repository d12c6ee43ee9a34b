/**
 * The forwarder against undici's MockAgent (which drives a dispatch handler as the real pool does)
 * and real node responses: cases the proxy's integration tests cannot reach.
 */
import { createMetricsRegistry } from '../telemetry/exposition.js';
import { once } from 'node:events';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MockAgent, type Dispatcher } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import { SidecarError } from '../errors.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { CLIENT_GONE, Exchange, Forwarder } from './forwarder.js';
import type { AccessTokenSource } from './types.js';
import { waitFor } from '../../test/helpers/wait.js';

const ORIGIN = 'https://api.example';
const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

const HELD_TOKEN: AccessTokenSource = {
  currentToken: () => 'token-1',
  getAccessToken: () => Promise.resolve('token-1'),
  invalidate: () => 'keep',
};

function forwarderWith(
  dispatcher: Dispatcher,
  tokens: AccessTokenSource = HELD_TOKEN,
  minBodyBytesPerSecond = 0,
) {
  return new Forwarder({
    upstream: ORIGIN,
    dispatcher,
    tokens,
    minBodyBytesPerSecond,
    timeoutMs: 5_000,
    metrics: createMetrics({
      registry: createMetricsRegistry(),
      defaultMetrics: false,
    }),
    logger: createLogger({ level: 'silent' }),
    clock: systemClock,
  });
}

/** A node server whose every request goes through `handle`; resolves with its base URL. */
async function serve(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handle);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => void server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function get(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => request(url, resolve).on('error', reject).end());
}

describe('forwarder', () => {
  it('keeps every line of a repeated field when a header was set on the response before the answer (node 20 writeHead)', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    closers.push(() => agent.close());
    agent
      .get(ORIGIN)
      .intercept({ path: '/v1.0/a' })
      .reply(200, 'ok', { headers: { 'set-cookie': ['a=1', 'b=2'], vary: 'accept' } });
    const forwarder = forwarderWith(agent);
    const base = await serve((req, res) => {
      // What the drain does to a response before it is written.
      res.setHeader('connection', 'close');
      void forwarder.forward(new Exchange(req, res, 'r1'));
    });
    const res = await get(`${base}/v1.0/a`);
    res.resume();
    expect(res.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(res.headers.connection).toBe('close');
    expect(res.headers['x-request-id']).toBe('r1');
  });

  it('a dispatcher that throws instead of calling the handler: 502 upstream_unreachable, nothing left held', async () => {
    const throwing = {
      dispatch: () => {
        throw new Error('dispatcher closed');
      },
    } as unknown as Dispatcher;
    const forwarder = forwarderWith(throwing);
    let exchange: Exchange | undefined;
    let settled!: Promise<unknown>;
    const base = await serve((req, res) => {
      exchange = new Exchange(req, res, 'r2');
      settled = forwarder.forward(exchange).catch((err: unknown) => {
        res.writeHead(502).end();
        return err;
      });
    });
    (await get(`${base}/v1.0/a`)).resume();
    const err = await settled;
    expect(err).toBeInstanceOf(SidecarError);
    expect((err as SidecarError).code).toBe('upstream_unreachable');
    expect(exchange?.held).toBeUndefined();
  });

  it('a client that leaves while its request waits for a token ends the forward at once', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    closers.push(() => agent.close());
    // No token now, and none coming: the wait would last `token.waitMs`.
    const forwarder = forwarderWith(agent, {
      getAccessToken: () => new Promise<string>(() => undefined),
      invalidate: () => 'keep',
    });
    let settled!: Promise<unknown>;
    const base = await serve((req, res) => {
      settled = forwarder.forward(new Exchange(req, res, 'r3'));
    });
    const client = request(`${base}/v1.0/a`);
    client.on('error', () => undefined);
    client.end();
    await waitUntil(() => settled !== undefined);
    client.destroy();
    // The forward ends without waiting for the token (here: never given).
    expect(await settled).toBe(CLIENT_GONE);
  });

  it('a body slower than proxy.minBodyBytesPerSecond once its first 10 s passed: 408 request_timeout', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const agent = new MockAgent();
    agent.disableNetConnect();
    closers.push(() => agent.close());
    const forwarder = forwarderWith(agent, HELD_TOKEN, 500);
    let settled!: Promise<unknown>;
    const base = await serve((req, res) => {
      settled = forwarder.forward(new Exchange(req, res, 'r4')).catch((err: unknown) => {
        res.writeHead(408).end();
        return err;
      });
    });
    const client = request(`${base}/v1.0/upload`, {
      method: 'POST',
      headers: { 'content-length': '4096' },
    });
    client.on('error', () => undefined);
    client.write('0123456789');
    await waitUntil(() => settled !== undefined);
    // 10 bytes in 10 s is below 500 B/s: the body's timer, re-aimed at the chunk, fires now.
    vi.setSystemTime(Date.now() + 10_000);
    client.write('0123456789');
    // Ended by the client leaving, not by the 30 s pause limit.
    const err = await settled;
    vi.useRealTimers();
    client.destroy();
    expect(err).toBeInstanceOf(SidecarError);
    expect((err as SidecarError).code).toBe('request_timeout');
    expect((err as SidecarError).message).toContain('500 bytes per second');
  });
});

function waitUntil(condition: () => boolean): Promise<void> {
  return waitFor(condition, 5_000, 'the forward to start');
}
