/**
 * Slow request bodies cannot hold the listener (DESIGN "Bounded work"): 1,000 connections trickle
 * POST bodies at 10 bytes every 4 s, well inside `proxy.bodyTimeoutMs`, while a normal client asks
 * every 500 ms. Requests receiving their body hold at most half of `proxy.maxInFlight`, and a body
 * averaging under `proxy.minBodyBytesPerSecond` after 10 s ends with 408. The real sidecar process
 * (the bundle) against the stand-in over HTTPS.
 */
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandin, type Standin } from '../src/standin/index.js';
import { startSidecarProcess, waitReady, writeTemp } from './helpers/sidecar-process.js';

let standin: Standin;

beforeAll(async () => {
  standin = await startStandin({ clientId: 'slow-client', clientSecret: 'slow-secret' });
});

afterAll(async () => {
  await standin?.close();
});

describe('slow request bodies', () => {
  it('1,000 connections trickling POST bodies: a normal GET every 500 ms is answered 200 within 2 s at least 90 % of the time', async () => {
    const sidecar = await startSidecarProcess({
      UPSTREAM_BASE_URL: standin.url,
      UPSTREAM_CA_FILE: writeTemp('ca.pem', standin.caCert),
      CLIENT_ID: 'slow-client',
      CLIENT_SECRET: 'slow-secret',
    });
    const port = Number(new URL(sidecar.proxyUrl).port);
    const sockets: Socket[] = [];
    const answers = new Map<Socket, string>();
    let trickle: NodeJS.Timeout | undefined;
    try {
      await waitReady(sidecar);
      for (let i = 0; i < 1_000; i++) {
        const socket = connect(port, '127.0.0.1');
        socket.on('error', () => undefined);
        socket.on('data', (d: Buffer) =>
          answers.set(socket, (answers.get(socket) ?? '') + d.toString()),
        );
        socket.write(
          `POST /v1.0/echo/slow-${i} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n`,
        );
        sockets.push(socket);
      }
      trickle = setInterval(() => {
        for (const socket of sockets) if (!socket.destroyed) socket.write('0123456789');
      }, 4_000);

      const results: { status: number; ms: number }[] = [];
      const started = Date.now();
      while (Date.now() - started < 20_000) {
        const sent = Date.now();
        const status = await request(`${sidecar.proxyUrl}/v1.0/contracts/`, {
          headersTimeout: 5_000,
        }).then(
          async (res) => {
            await res.body.dump();
            return res.statusCode;
          },
          () => 0,
        );
        const ms = Date.now() - sent;
        results.push({ status, ms });
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, 500 - ms)));
      }
      const good = results.filter((r) => r.status === 200 && r.ms <= 2_000).length;
      console.info(
        `slow bodies: ${good} of ${results.length} GETs answered 200 within 2 s; statuses ${JSON.stringify(
          results.reduce<Record<number, number>>(
            (acc, r) => ({ ...acc, [r.status]: (acc[r.status] ?? 0) + 1 }),
            {},
          ),
        )}`,
      );
      expect(good / results.length).toBeGreaterThanOrEqual(0.9);
      // The trickles beyond half the slots were refused at once; the others ended with 408 once
      // their average fell below 500 B/s (after 10 s).
      const texts = [...answers.values()];
      expect(texts.filter((t) => t.startsWith('HTTP/1.1 503')).length).toBeGreaterThan(0);
      expect(texts.filter((t) => t.startsWith('HTTP/1.1 408')).length).toBeGreaterThan(0);
    } finally {
      if (trickle !== undefined) clearInterval(trickle);
      for (const socket of sockets) socket.destroy();
      await sidecar.stop();
    }
  }, 90_000);
});
