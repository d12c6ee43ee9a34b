import { request, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/helpers/sidecar-process.js';
import { createInFlightLimit } from '../proxy/admission.js';
import { createMetricsRegistry } from '../telemetry/exposition.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { createDrainState } from './drain.js';
import { SOCKET_HIGH_WATER_MARK, startProxyServer, type ProxyServer } from './proxy-server.js';
import type { ProxyHandler } from './proxy-handler.js';

const quiet = new Writable({ write: (_chunk, _encoding, done) => done() });

/** A listener on a free port with `handler` and `maxPipelined`, everything else at rest. */
function listener(handler: ProxyHandler, maxPipelined = 4): Promise<ProxyServer> {
  return startProxyServer({
    handler,
    listen: { host: '127.0.0.1', port: 0 },
    http2: false,
    maxPipelined,
    maxHeaders: 100,
    inFlight: createInFlightLimit(8),
    drainState: createDrainState(),
    logger: createLogger({ level: 'silent', destination: quiet }),
    requestLog: undefined,
    metrics: createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false }),
  });
}

describe('the HTTP/1.1 listener', () => {
  let proxy: ProxyServer | undefined;
  afterEach(async () => {
    await proxy?.drain(100);
    proxy = undefined;
  });

  // docs/design.md "Bounded work": answers go out in request order, so a request behind one whose
  // client stops reading could only hold an upstream request while its answer waits in memory.
  it('handles the pipelined requests of a connection one after another, in order', async () => {
    const started: string[] = [];
    const open: ServerResponse[] = [];
    // Requests whose answer was not yet complete when a later one started.
    let overlapping = 0;
    proxy = await listener((req, res) => {
      started.push(req.url ?? '');
      overlapping += open.filter((earlier) => !earlier.writableFinished).length;
      open.push(res as ServerResponse);
      return Promise.resolve();
    });
    const socket = connect(proxy.address.port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.write(['/a', '/b', '/c'].map((p) => `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`).join(''));
    try {
      await waitFor(() => started.length >= 1, 5_000, 'the first request');
      // A macrotask or two more: a gate that ran them at once would have started all three.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(started).toEqual(['/a']);
      open[0]!.end('first');
      await waitFor(() => started.length === 2, 5_000, 'the second request');
      expect(started).toEqual(['/a', '/b']);
      open[1]!.end('second');
      await waitFor(() => started.length === 3, 5_000, 'the third request');
      open[2]!.end('third');
      await waitFor(() => received.split('HTTP/1.1 200').length === 4, 5_000, 'three answers');
      expect(received.indexOf('first')).toBeLessThan(received.indexOf('second'));
      expect(received.indexOf('second')).toBeLessThan(received.indexOf('third'));
      expect(overlapping).toBe(0);
    } finally {
      socket.destroy();
    }
  });

  // Node 22+ would buffer 64 KiB per client socket: a reader that stops is noticed later, and each
  // write to a peer with a tiny receive window is cut by the kernel into many small segments.
  it('buffers at most 16 KiB per client socket before backpressure, on every node', async () => {
    const seen: number[] = [];
    proxy = await listener((_req, res) => {
      const socket = (res as unknown as { socket: Socket }).socket;
      seen.push(
        socket.writableHighWaterMark,
        (res as { writableHighWaterMark: number }).writableHighWaterMark,
      );
      res.end('ok');
      return Promise.resolve();
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
