/**
 * The forwarder against undici's MockAgent (which drives a dispatch handler as the real pool does)
 * and real node responses: cases the proxy's integration tests cannot reach.
 */
import { once } from 'node:events';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { MockAgent, type Dispatcher } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../clock.js';
import { SidecarError } from '../errors.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { createForwarder, type ForwardContext } from './forwarder.js';

const ORIGIN = 'https://api.example';
const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

function forwarderWith(dispatcher: Dispatcher) {
  return createForwarder({
    upstream: ORIGIN,
    dispatcher,
    tokens: {
      currentToken: () => 'token-1',
      getAccessToken: () => Promise.resolve('token-1'),
      invalidate: () => 'keep',
    },
    timeoutMs: 5_000,
    metrics: createMetrics({ registry: new Registry(), defaultMetrics: false }),
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
      void forwarder.forward(req, res, { requestId: 'r1' });
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
    const holds: Promise<void>[] = [];
    const ctx: ForwardContext = { requestId: 'r2', hold: (until) => void holds.push(until) };
    let settled!: Promise<unknown>;
    const base = await serve((req, res) => {
      settled = forwarder.forward(req, res, ctx).catch((err: unknown) => {
        res.writeHead(502).end();
        return err;
      });
    });
    (await get(`${base}/v1.0/a`)).resume();
    const err = await settled;
    expect(err).toBeInstanceOf(SidecarError);
    expect((err as SidecarError).code).toBe('upstream_unreachable');
    expect(holds).toEqual([]);
  });
});
