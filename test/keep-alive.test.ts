/**
 * The HTTP/1.1 listener's keep-alive timeout (src/http/idle-connections.ts) against real servers:
 * advertised in every answer that keeps its connection, idle connections closed after it (never
 * before), busy and used connections kept. node's own per-answer timer is off on this listener.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/clock.js';
import { createResponseCache } from '../src/proxy/cache/response-cache.js';
import { createMetricsRegistry } from '../src/telemetry/exposition.js';
import { createMetrics } from '../src/telemetry/metrics.js';
import { createTestPki, startStandin, type Standin, type TestPki } from '../src/standin/index.js';
import { waitFor } from './helpers/sidecar-process.js';
import { startCountingUpstream } from './helpers/upstream.js';
import { rawRequest, startStack, type Stack } from './proxy-stack.js';

let pki: TestPki;
let standin: Standin;

beforeAll(async () => {
  pki = await createTestPki();
  standin = await startStandin({ pki });
});

afterAll(async () => {
  await standin.close();
});

/** A raw HTTP/1.1 connection that records what arrives and when it was closed. */
function rawConnection(port: number) {
  const socket: Socket = connect({ port, host: '127.0.0.1' });
  const state = { text: '', closedAt: 0, lastDataAt: 0 };
  socket.on('data', (chunk: Buffer) => {
    state.text += chunk.toString('latin1');
    state.lastDataAt = Date.now();
  });
  socket.on('close', () => (state.closedAt = Date.now()));
  socket.on('error', () => undefined);
  return {
    socket,
    state,
    answers: () => [...state.text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].length,
    get: (path: string, extra = '') =>
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`),
  };
}

// Every test side by side: each watches its own connections, and those of the shortened timeout
// wait for the sweep (once a second) to close them.
describe.concurrent('the listener', () => {
  describe('keep-alive at the shipped timeout', () => {
    let stack: Stack;
    beforeAll(async () => {
      stack = await startStack(standin);
    });
    afterAll(async () => {
      await stack.close();
    });

    it('advertises Keep-Alive: timeout=65 in forwarded answers and in the sidecar’s own', async () => {
      const conn = rawConnection(stack.port);
      conn.get('/v1.0/contracts/');
      await waitFor(() => conn.answers() === 1, 5_000, 'forwarded answer');
      conn.get('/not-allowed/');
      await waitFor(() => conn.answers() === 2, 5_000, 'error answer');
      const heads = conn.state.text.split(/HTTP\/1\.1 /).slice(1);
      expect(heads[0]).toMatch(/^200 /);
      expect(heads[1]).toMatch(/^404 /);
      for (const head of heads) {
        expect(head).toMatch(/\r\nConnection: keep-alive\r\n/i);
        expect(head).toMatch(/\r\nKeep-Alive: timeout=65\r\n/i);
      }
      expect(conn.state.closedAt).toBe(0);
      conn.socket.destroy();
    });

    it('advertises it to an HTTP/1.0 client only when it asked for keep-alive, as node does', async () => {
      const plain = await rawRequest(stack.port, 'GET /v1.0/contracts/ HTTP/1.0\r\n\r\n');
      expect(plain.status).toBe(200);
      expect(plain.headers['keep-alive']).toBeUndefined();
      const conn = rawConnection(stack.port);
      conn.socket.write('GET /v1.0/contracts/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
      await waitFor(() => conn.answers() === 1, 5_000, 'HTTP/1.0 keep-alive answer');
      expect(conn.state.text).toMatch(/\r\nKeep-Alive: timeout=65\r\n/i);
      conn.socket.destroy();
    });

    it('advertises it in an answer from the response cache', async () => {
      const cache = createResponseCache({
        settings: {
          rules: [{ prefix: '/v1.0/', ttlSeconds: 60 }],
          maxBytes: 1 << 20,
          maxEntryBytes: 256 * 1024,
          maxEntries: 100,
          shared: false,
          maxSharedEntryBytes: 256 * 1024,
          staleIfErrorSeconds: 0,
          staleWhileRevalidateSeconds: 0,
        },
        clock: systemClock,
        metrics: createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false }),
      });
      const cached = await startStack(standin, { cache });
      try {
        const conn = rawConnection(cached.port);
        conn.get('/v1.0/contracts/');
        await waitFor(() => conn.answers() === 1, 5_000, 'stored answer');
        conn.get('/v1.0/contracts/');
        await waitFor(() => conn.answers() === 2, 5_000, 'answer from the cache');
        const hit = conn.state.text.split(/HTTP\/1\.1 /)[2]!;
        expect(hit).toMatch(/\r\nCache-Status: oauth-sidecar; hit\r\n/i);
        expect(hit).toMatch(/\r\nKeep-Alive: timeout=65\r\n/i);
        conn.socket.destroy();
      } finally {
        await cached.close();
      }
    });

    it('advertises nothing on an answer that closes its connection', async () => {
      const conn = rawConnection(stack.port);
      conn.get('/v1.0/contracts/', 'Connection: close\r\n');
      await waitFor(() => conn.state.closedAt > 0, 5_000, 'close');
      expect(conn.state.text).toMatch(/\r\nConnection: close\r\n/i);
      expect(conn.state.text).not.toMatch(/Keep-Alive:/i);
    });
  });

  describe('keep-alive timeout (shortened to 1 s: closed after 2 s quiet)', () => {
    let stack: Stack;
    let slow: Awaited<ReturnType<typeof startCountingUpstream>>;
    /** Answers the request for /v1.0/slow, held until the test calls it. */
    let releaseSlow: (() => void) | undefined;

    beforeAll(async () => {
      slow = await startCountingUpstream(pki, (req, res, done) => {
        const answer = () => {
          res.end('{"ok":true}');
          done();
        };
        if (req.url === '/v1.0/slow') releaseSlow = answer;
        else answer();
      });
      stack = await startStack(standin, {
        upstream: slow.url,
        limits: { keepAliveTimeoutMs: 1_000 },
      });
    });
    afterAll(async () => {
      releaseSlow?.();
      await stack.close();
      await slow.close();
    });

    it('closes an idle connection once it was quiet for the timeout', async () => {
      const conn = rawConnection(stack.port);
      conn.get('/v1.0/contracts/');
      await waitFor(() => conn.answers() === 1, 5_000, 'answer');
      expect(conn.state.text).toMatch(/\r\nKeep-Alive: timeout=1\r\n/i);
      await waitFor(() => conn.state.closedAt > 0, 30_000, 'idle close');
      // When exactly (after the timeout, never before, at most one sweep late) is
      // src/http/idle-connections.test.ts's, on a fake clock: here the real listener closes it.
    });

    it('keeps a connection whose request is in progress past the timeout, and one used more often', async () => {
      const busy = rawConnection(stack.port);
      const used = rawConnection(stack.port);
      busy.get('/v1.0/slow');
      await waitFor(() => releaseSlow !== undefined, 5_000, 'the slow request upstream');
      const ticker = setInterval(() => used.get('/v1.0/contracts/'), 500);
      try {
        // A connection that goes quiet after the slow request started: once the sweep closed it,
        // the slow request has been in progress for longer than the timeout, and the upstream
        // still holds its answer.
        const quiet = rawConnection(stack.port);
        quiet.get('/v1.0/contracts/');
        await waitFor(() => quiet.state.closedAt > 0, 30_000, 'the quiet connection closed');
        expect(busy.answers()).toBe(0);
        expect(busy.state.closedAt).toBe(0);
        expect(used.state.closedAt).toBe(0);
        expect(used.answers()).toBeGreaterThanOrEqual(2);
        releaseSlow!();
        await waitFor(() => busy.answers() === 1, 5_000, 'slow answer');
      } finally {
        clearInterval(ticker);
      }
      // Both go quiet now, and both are closed.
      await waitFor(
        () => busy.state.closedAt > 0 && used.state.closedAt > 0,
        10_000,
        'both closed once quiet',
      );
    });

    it('closes a connection that never sent a request', async () => {
      const conn = rawConnection(stack.port);
      await new Promise<void>((resolve) => conn.socket.once('connect', resolve));
      await waitFor(() => conn.state.closedAt > 0, 10_000, 'idle close');
      // Closed by the same sweep as a quiet connection, and not because the sidecar refused it: no
      // byte was answered. Never before the timeout is src/http/idle-connections.test.ts's, on a
      // fake clock.
      expect(conn.state.text).toBe('');
    });
  });
});
