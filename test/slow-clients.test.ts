/**
 * docs/design.md "Bounded work": clients that cost the sidecar time rather than requests, against the
 * built bundle. An h2 reset storm against a slow (3 s) upstream path must give every slot back
 * before the upstream answers and send few of the reset streams upstream; 1,000 connections
 * trickling request bodies must not keep normal GETs from being answered, and are cut with 408.
 * The fast-path storm is in flood.test.ts; the latencies are figures of bench/hostile-load.mjs.
 */
import { connect as connectH2, constants as h2 } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import {
  startSidecarProcess,
  waitFor,
  waitReady,
  type SidecarProcess,
} from './helpers/sidecar-process.js';
import { useLimitsFixture } from './helpers/limits-fixture.js';

/** The upstream's slow path answers after this long, as in the measurement. */
const SLOW_MS = 3_000;

/** Requests for the slow path that reached the upstream. */
let slowRequests = 0;

const fixture = useLimitsFixture(
  { clientId: 'slow', clientSecret: 'slow-secret' },
  (req, res, done) => {
    const slow = req.url?.startsWith('/v1.0/slow/') === true;
    if (slow) slowRequests += 1;
    req.resume();
    const answer = () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ path: req.url }));
      done();
    };
    if (slow) setTimeout(answer, SLOW_MS);
    else answer();
  },
);

/** Sidecars of this file; one a failed test left running is killed after it. */
const sidecars: SidecarProcess[] = [];

afterEach(() => {
  for (const s of sidecars.splice(0)) {
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  }
});

async function sidecar(extra: Record<string, string>): Promise<SidecarProcess> {
  const s = await startSidecarProcess({
    ...fixture.env(),
    // info: the helper waits for the "listening" line (the shipped default too).
    LOG_LEVEL: 'info',
    ...extra,
  });
  sidecars.push(s);
  await waitReady(s);
  return s;
}

async function inFlight(s: SidecarProcess): Promise<number> {
  const res = await request(`${s.adminUrl}/metrics`, { headersTimeout: 5_000 });
  const text = await res.body.text();
  return Number(/\noauth_sidecar_requests_in_flight (\d+)\n/.exec(text)?.[1] ?? NaN);
}

/** One GET on an h2 session: its status, or 0 when none came within `timeoutMs`. */
function h2Status(
  session: ReturnType<typeof connectH2>,
  path: string,
  timeoutMs: number,
): Promise<number> {
  const stream = session.request({ ':path': path });
  stream.on('error', () => undefined);
  stream.resume();
  return new Promise<number>((resolve) => {
    const timer = setTimeout(() => {
      stream.close(h2.NGHTTP2_CANCEL);
      resolve(0);
    }, timeoutMs);
    stream.once('response', (headers) => {
      clearTimeout(timer);
      resolve(Number(headers[':status']));
    });
  });
}

describe('h2c streams the client resets, on a slow upstream path', () => {
  it('20,000 reset streams to a 3 s path: slots given back, few sent upstream', async () => {
    const s = await sidecar({ PROXY_HTTP2: 'true' });
    const slowBefore = slowRequests;
    // 200 sessions × 100 streams (each session's limit), each HEADERS followed by its RST_STREAM.
    const sessions: ReturnType<typeof connectH2>[] = [];
    for (let n = 0; n < 200; n++) {
      const storm = connectH2(s.proxyUrl);
      storm.on('error', () => undefined);
      sessions.push(storm);
      const settled = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), 10_000);
        storm.once('remoteSettings', () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      expect(settled, `session ${n} got the sidecar's SETTINGS`).toBe(true);
      for (let i = 0; i < 100; i++) {
        const stream = storm.request({ ':path': `/v1.0/slow/${n}/${i}` });
        stream.on('error', () => undefined);
        stream.close(h2.NGHTTP2_CANCEL);
      }
    }
    // The slots come back: the in-flight gauge falls to at most 64 (how soon is a figure of
    // bench/hostile-load.mjs; on a loaded machine this process may read it only seconds later).
    const gaugeWatch = waitFor(
      async () => (await inFlight(s)) <= 64,
      60_000,
      'the in-flight gauge at most 64',
    );
    const session = connectH2(s.proxyUrl);
    session.on('error', () => undefined);
    const status = await h2Status(session, '/v1.0/after-the-storm', 30_000);
    await gaugeWatch;
    // Reset streams sent before their RST_STREAM was seen reach the upstream; counted once the
    // sidecar let go of every request and the upstream answered all it got.
    await waitFor(async () => (await inFlight(s)) === 0, 30_000, 'in flight 0');
    await waitFor(() => fixture.upstream.inProgress === 0, 30_000, 'the upstream idle');
    const reached = slowRequests - slowBefore;
    session.destroy();
    for (const storm of sessions) storm.destroy();
    expect(status).toBe(200);
    // How many reached it is a figure (bench/hostile-load.mjs); most never do.
    expect(reached).toBeLessThan(5_000);
    expect(s.child.exitCode).toBeNull();
    expect(await s.stop()).toBe(0);
  }, 240_000);
});

describe('slow request bodies', () => {
  it('1,000 connections trickling POST bodies leave room for normal GETs', async () => {
    const s = await sidecar({});
    const port = Number(new URL(s.proxyUrl).port);
    const TRICKLERS = 1_000;
    const sockets = new Set<Socket>();
    let stopping = false;
    /** Answers 408 (too slow on average, proxy.minBodyBytesPerSecond) the tricklers got. */
    let tooSlow = 0;
    // Content-Length 4096, as slowhttptest -B sends; 10 bytes every 4 s, one timer for all.
    const open = (): void => {
      if (stopping) return;
      const socket = connect(port, '127.0.0.1');
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('data', (chunk: Buffer) => {
        if (chunk.toString('latin1').startsWith('HTTP/1.1 408 ')) tooSlow += 1;
      });
      socket.once('close', () => sockets.delete(socket));
      socket.write(
        'POST /v1.0/upload HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 4096\r\n\r\n0123456789',
      );
    };
    for (let i = 0; i < TRICKLERS; i++) open();
    const trickle = setInterval(() => {
      for (const socket of sockets) socket.write('0123456789');
      // Keep 1,000 connections trickling: those the sidecar closed (408) are replaced here, not
      // at once, so a refused connection cannot turn into a busy loop of this test's own.
      for (let i = sockets.size; i < TRICKLERS; i++) open();
    }, 4_000);
    try {
      await waitFor(async () => (await inFlight(s)) >= 200, 30_000, '200 bodies in flight');
      // Other clients are answered meanwhile (how fast is bench/hostile-load.mjs's figure).
      for (let i = 0; i < 5; i++) {
        const res = await request(`${s.proxyUrl}/v1.0/normal/${i}`, { headersTimeout: 30_000 });
        await res.body.dump();
        expect(res.statusCode).toBe(200);
      }
      // 10 bytes every 4 s is far below 500 B/s: each body is cut off once its first 10 s passed.
      await waitFor(() => tooSlow > 0, 30_000, 'a trickled body cut off with 408');
      expect(s.child.exitCode).toBeNull();
    } finally {
      stopping = true;
      clearInterval(trickle);
      for (const socket of sockets) socket.destroy();
    }
    expect(await s.stop()).toBe(0);
  }, 120_000);
});
