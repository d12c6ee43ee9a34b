import { request } from 'node:http';
import type { Socket } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createInFlightLimit } from '../proxy/admission.js';
import { createMetricsRegistry } from '../telemetry/exposition.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { createDrainState } from './drain.js';
import { SOCKET_HIGH_WATER_MARK, startProxyServer, type ProxyServer } from './proxy-server.js';

const quiet = new Writable({ write: (_chunk, _encoding, done) => done() });

describe('the HTTP/1.1 listener', () => {
  let proxy: ProxyServer | undefined;
  afterEach(async () => {
    await proxy?.drain(100);
    proxy = undefined;
  });

  // Node 22+ would buffer 64 KiB per client socket: a reader that stops is noticed later, and each
  // write to a peer with a tiny receive window is cut by the kernel into many small segments.
  it('buffers at most 16 KiB per client socket before backpressure, on every node', async () => {
    const seen: number[] = [];
    proxy = await startProxyServer({
      handler: (_req, res) => {
        const socket = (res as unknown as { socket: Socket }).socket;
        seen.push(
          socket.writableHighWaterMark,
          (res as { writableHighWaterMark: number }).writableHighWaterMark,
        );
        res.end('ok');
        return Promise.resolve();
      },
      listen: { host: '127.0.0.1', port: 0 },
      http2: false,
      maxPipelined: 4,
      maxHeaders: 100,
      inFlight: createInFlightLimit(8),
      drainState: createDrainState(),
      logger: createLogger({ level: 'silent', destination: quiet }),
      requestLog: undefined,
      metrics: createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false }),
    });
    const { port } = proxy.address;
    const status = await new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port, path: '/' }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
        .on('error', reject)
        .end();
    });
    expect(status).toBe(200);
    expect(SOCKET_HIGH_WATER_MARK).toBe(16 * 1024);
    expect(seen).toEqual([SOCKET_HIGH_WATER_MARK, SOCKET_HIGH_WATER_MARK]);
  });
});
