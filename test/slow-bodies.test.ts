/**
 * Slow request bodies cannot hold the listener (DESIGN "Bounded work"): 100 connections trickle
 * POST bodies at 10 bytes every 4 s, well inside `proxy.bodyTimeoutMs`, while a normal client asks.
 * Requests receiving their body hold at most half of `proxy.maxInFlight` (the rest are refused
 * 503), and a body averaging under `proxy.minBodyBytesPerSecond` after 10 s ends with 408. The real
 * sidecar process (the bundle) against the stand-in over HTTPS, with `proxy.maxInFlight` at 32: the
 * 100 trickles are six times the 16 slots bodies may hold. How fast the normal client is answered
 * beside 1,000 of them is a figure of bench/hostile-load.mjs.
 */
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandin, type Standin } from '../src/standin/index.js';
import { startSidecarProcess, waitFor, waitReady, writeTemp } from './helpers/sidecar-process.js';

const MAX_IN_FLIGHT = 32;
const TRICKLES = 100;

let standin: Standin;

beforeAll(async () => {
  standin = await startStandin({ clientId: 'slow-client', clientSecret: 'slow-secret' });
});

afterAll(async () => {
  await standin?.close();
});

async function inFlight(adminUrl: string): Promise<number> {
  const res = await request(`${adminUrl}/metrics`, { headersTimeout: 5_000 });
  const text = await res.body.text();
  return Number(/\noauth_sidecar_requests_in_flight (\d+)\n/.exec(text)?.[1] ?? NaN);
}

describe('slow request bodies', () => {
  it('100 connections trickling POST bodies: normal GETs are answered, trickles beyond half the slots refused, slow bodies cut with 408', async () => {
    const sidecar = await startSidecarProcess({
      UPSTREAM_BASE_URL: standin.url,
      UPSTREAM_CA_FILE: writeTemp('ca.pem', standin.caCert),
      CLIENT_ID: 'slow-client',
      CLIENT_SECRET: 'slow-secret',
      PROXY_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT),
    });
    const port = Number(new URL(sidecar.proxyUrl).port);
    const sockets: Socket[] = [];
    const answers = new Map<Socket, string>();
    let trickle: NodeJS.Timeout | undefined;
    try {
      await waitReady(sidecar);
      for (let i = 0; i < TRICKLES; i++) {
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
      // The trickles hold every slot a body may: half of maxInFlight.
      await waitFor(
        async () => (await inFlight(sidecar.adminUrl)) >= MAX_IN_FLIGHT / 2,
        30_000,
        'half the slots held by trickles',
      );
      for (let i = 0; i < 5; i++) {
        const res = await request(`${sidecar.proxyUrl}/v1.0/contracts/`, {
          headersTimeout: 30_000,
        });
        await res.body.dump();
        expect(res.statusCode).toBe(200);
      }
      // The trickles beyond half the slots were refused at once; the others ended with 408 once
      // their average fell below 500 B/s (after 10 s).
      const seen = (status: string) =>
        [...answers.values()].some((t) => t.startsWith(`HTTP/1.1 ${status}`));
      await waitFor(() => seen('503'), 30_000, 'a trickle refused with 503');
      await waitFor(() => seen('408'), 30_000, 'a trickle cut with 408');
    } finally {
      if (trickle !== undefined) clearInterval(trickle);
      for (const socket of sockets) socket.destroy();
      await sidecar.stop();
    }
  }, 90_000);
});
