/**
 * The abuse floods against the real sidecar process in the container's runtime (the
 * Dockerfile's NODE_OPTIONS heap cap, GLIBC_TUNABLES and ENTRYPOINT node flags): one connection
 * pipelining 200 GETs of 4 KB, and 1,000 h2 streams opened and reset at once. The process must
 * stay alive, leave the pipelined requests past `proxy.maxPipelined` unread in the socket and
 * handle the others one after another, the upstream see at most `upstream.maxConnections`
 * connections, /metrics and other clients be answered meanwhile, and most reset streams never be
 * forwarded. How long the other clients waited, and the peak RSS under floods of 20,000, are
 * figures: bench/hostile-load.mjs measures them.
 */
import { connect as connectH2, constants as h2 } from 'node:http2';
import { connect } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  readyInTests,
  startSidecarProcess,
  waitFor,
  waitReady,
  type SidecarProcess,
} from './helpers/sidecar-process.js';
import { useLimitsFixture } from './helpers/limits-fixture.js';
import { kernelQueues } from './helpers/upstream.js';
import { SHIPPED_ENV, SHIPPED_NODE_FLAGS } from './helpers/shipped-runtime.js';

/** `upstream.maxConnections`: the storm's 1,000 streams are 250 times as many. */
const MAX_CONNECTIONS = 4;
/**
 * The pipelined flood: its requests go one after another (upstream and back for each), so its
 * time is their count. Padded to 4 KB each, 200 of them are as many bytes as 20,000 bare GETs:
 * node reads a connection 64 KiB at a time (16 of these requests), and the pipelining gate
 * (`proxy.maxPipelined`, 8) stops reading the socket and starts it again at each of those reads,
 * as often as under the bench's flood of 20,000.
 */
const FLOOD = 200;
const FLOOD_REQUEST = `GET /v1.0/flood HTTP/1.1\r\nHost: x\r\nX-Pad: ${'p'.repeat(4_000)}\r\n\r\n`;
/** `proxy.maxInFlight` of the h2c sidecar: the storm's 1,000 streams are 8 times as many. */
const MAX_IN_FLIGHT = 128;
/** 10 sessions of 100 streams (each session's limit). */
const STORM_SESSIONS = 10;

/** Requests of the h2 storm's reset streams that reached the upstream. */
let resetRequests = 0;

const fixture = useLimitsFixture(
  { clientId: 'flood', clientSecret: 'flood-secret' },
  (req, res, done) => {
    if (req.url?.startsWith('/v1.0/reset/') === true) resetRequests += 1;
    const answer = (): void => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ path: req.url }));
      done();
    };
    // The pipelined flood is handled one request at a time: its answers come at once, or 200
    // of them would take 200 upstream delays. The h2 storm's answers are still in progress
    // when their streams are reset.
    if (req.url === '/v1.0/flood') answer();
    else setTimeout(answer, 5);
  },
);

/** The HTTP/1.1 sidecar and the h2c one, started side by side for the file. */
let h1: SidecarProcess | undefined;
let h2c: SidecarProcess | undefined;

async function sidecar(extra: Record<string, string>): Promise<SidecarProcess> {
  const process = await startSidecarProcess(
    {
      ...SHIPPED_ENV,
      ...fixture.env(),
      UPSTREAM_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
      // info: the helper waits for the listening line; it is the shipped default too.
      LOG_LEVEL: 'info',
      ...extra,
    },
    [],
    SHIPPED_NODE_FLAGS,
  );
  await waitReady(process);
  return process;
}

beforeAll(async () => {
  [h1, h2c] = await Promise.all([
    sidecar({}),
    sidecar({ PROXY_HTTP2: 'true', PROXY_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT) }),
  ]);
});

afterAll(async () => {
  await Promise.all([h1?.stop('SIGKILL'), h2c?.stop('SIGKILL')]);
});

/** One GET on an h2 session; resolves with its status. */
function h2Status(session: ReturnType<typeof connectH2>, path: string): Promise<number> {
  const stream = session.request({ ':path': path });
  stream.resume();
  return new Promise<number>((resolve) =>
    stream.once('response', (headers) => resolve(Number(headers[':status']))),
  );
}

/** `oauth_sidecar_requests_in_flight` in a /metrics text. */
function inFlightIn(metrics: string): number {
  return Number(/\noauth_sidecar_requests_in_flight (\d+)\n/.exec(metrics)?.[1] ?? NaN);
}

/**
 * /metrics and a client's GET: both answered (generous timeouts: a loaded machine is slow).
 * Resolves with the in-flight gauge /metrics read, before the other client asked.
 */
async function probe(
  s: SidecarProcess,
  other: () => Promise<number> = async () => {
    const res = await request(`${s.proxyUrl}/v1.0/other`, { headersTimeout: 30_000 });
    await res.body.text();
    return res.statusCode;
  },
): Promise<number> {
  const metrics = await request(`${s.adminUrl}/metrics`, { headersTimeout: 30_000 });
  const text = await metrics.body.text();
  expect(metrics.statusCode).toBe(200);
  expect(await other()).toBe(200);
  return inFlightIn(text);
}

describe('floods under the container heap cap', () => {
  it('one connection pipelining 200 GETs of 4 KB: the later ones left unread in the socket, one handled at a time, at most maxConnections upstream, others answered', async () => {
    const s = readyInTests(h1, 'the HTTP/1.1 sidecar');
    const connectionsBefore = fixture.upstream.connections;
    const port = Number(new URL(s.proxyUrl).port);
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let answers = 0;
    let tail = '';
    socket.on('data', (chunk: Buffer) => {
      const text = tail + chunk.toString('latin1');
      answers += text.split('HTTP/1.1 200 ').length - 1;
      tail = text.slice(-16);
    });
    socket.write(FLOOD_REQUEST.repeat(FLOOD));
    /** The flood's bytes the sidecar has not read: in its socket, in ours, in our buffer. */
    const unread = () =>
      kernelQueues({ localPort: port, remotePort: socket.localPort }).rx +
      kernelQueues({ localPort: socket.localPort, remotePort: port }).tx +
      socket.writableLength;
    // Read while the flood runs, once the sidecar answered a probe (its event loop ran: a socket
    // it reads is empty by then). The in-flight gauge is read before the other client asks.
    const samples: { inFlight: number; unread: number }[] = [];
    while (answers < FLOOD) {
      expect(s.child.exitCode).toBeNull();
      const inFlight = await probe(s);
      samples.push({ inFlight, unread: unread() });
    }
    expect(samples.length).toBeGreaterThan(0);
    socket.destroy();
    expect(s.child.exitCode).toBeNull();
    // The gate stops reading the socket at proxy.maxPipelined: hundreds of KB stay in the kernel
    // while the requests read are handled. A sidecar reading on would hold all 200 in memory.
    expect(Math.max(...samples.map((x) => x.unread))).toBeGreaterThan(256 * 1024);
    // One of the connection's requests in progress at a time, the others parsed and waiting
    // (at most one read's): without the gate, every request of a read would be in progress.
    expect(Math.max(...samples.map((x) => x.inFlight))).toBeLessThanOrEqual(1);
    expect(fixture.upstream.connections - connectionsBefore).toBeLessThanOrEqual(MAX_CONNECTIONS);
    expect(await s.stop()).toBe(0);
  }, 120_000);

  it('1,000 h2 streams opened and reset at once are not forwarded', async () => {
    const s = readyInTests(h2c, 'the h2c sidecar');
    const pid = s.child.pid!;
    const resetsBefore = resetRequests;
    await waitFor(
      () => fixture.upstream.open === 0,
      60_000,
      'the previous test’s connections to close',
    );
    // Sampled every 10 ms from the kernel's table: the upstream's own count of open sockets lags
    // while its process is busy (a connection undici dropped after an aborted request is still
    // counted until its close is handled), which made this check flaky under a full parallel run.
    // Only the sidecar's own sockets count: a sidecar of a parallel test may dial a port its
    // closed upstream had.
    let maxOpen = 0;
    const sampler = setInterval(() => {
      maxOpen = Math.max(maxOpen, fixture.upstream.establishedClients(pid));
    }, 10);
    // Probed while the storm runs: /metrics answered, another client answered too. An
    // `overloaded` 503 is an answer too (more than maxInFlight streams may be in progress then).
    const during: { metrics: number; status: number }[] = [];
    let storming = true;
    const prober = (async () => {
      while (storming) {
        const metrics = await request(`${s.adminUrl}/metrics`, { headersTimeout: 30_000 });
        await metrics.body.text();
        const other = connectH2(s.proxyUrl);
        other.on('error', () => undefined);
        const status = await h2Status(other, '/v1.0/other');
        other.close();
        during.push({ metrics: metrics.statusCode, status });
      }
    })();
    // Sessions of 100 streams (each session's limit): every HEADERS frame is sent and followed by
    // its RST_STREAM. (One session with thousands of queued streams stalls Node 24's own http2
    // client, with or without the sidecar.)
    const sessions: ReturnType<typeof connectH2>[] = [];
    for (let n = 0; n < STORM_SESSIONS; n++) {
      const storm = connectH2(s.proxyUrl);
      storm.on('error', () => undefined);
      sessions.push(storm);
      await new Promise<void>((resolve) => storm.once('remoteSettings', () => resolve()));
      for (let i = 0; i < 100; i++) {
        const stream = storm.request({ ':path': `/v1.0/reset/${n}/${i}` });
        stream.on('error', () => undefined);
        stream.close(h2.NGHTTP2_CANCEL);
      }
    }
    // While the storm's streams are being wound up, more than maxInFlight may be in progress
    // (503 overloaded is the right answer then); wait until they are.
    await waitFor(
      async () => {
        const res = await request(`${s.adminUrl}/metrics`);
        return inFlightIn(await res.body.text()) === 0;
      },
      60_000,
      'the storm wound up',
    );
    storming = false;
    await prober;
    expect(during.length).toBeGreaterThan(0);
    for (const d of during) {
      expect(d.metrics).toBe(200);
      expect([200, 503]).toContain(d.status);
    }
    const session = connectH2(s.proxyUrl);
    session.on('error', () => undefined);
    // Every stream is closed on the client; a normal request on the same session comes after them.
    expect(await h2Status(session, '/v1.0/after-the-storm')).toBe(200);
    await probe(s, async () => {
      const other = connectH2(s.proxyUrl);
      try {
        return await h2Status(other, '/v1.0/other');
      } finally {
        other.close();
      }
    });
    session.destroy();
    for (const storm of sessions) storm.destroy();
    expect(s.child.exitCode).toBeNull();
    // A stream the sidecar saw reset before sending it is never sent (it checks after every wait,
    // and h2 requests first wait two macrotasks, past the next poll phase, for a RST_STREAM that
    // came with or just after their HEADERS). A stream whose RST_STREAM arrives after it was sent
    // cannot be unsent: its answer is read and dropped. This test process writes the cancels
    // while busy with the storm and the upstream, so some come late.
    const forwarded = resetRequests - resetsBefore;
    // Most reset streams are never sent; how many were is a figure (bench/hostile-load.mjs,
    // 5-17 % of 20,000 depending on the Node version and the load). Half of them sent would mean
    // the sidecar no longer looks for resets before it sends (each session's 100 streams fit in
    // maxInFlight: none is refused for it).
    expect(forwarded).toBeLessThan((STORM_SESSIONS * 100) / 2);
    clearInterval(sampler);
    // Aborting an HTTP/1.1 request in flight costs its connection; open at once: at most the cap.
    expect(maxOpen).toBeLessThanOrEqual(MAX_CONNECTIONS);
    expect(await s.stop()).toBe(0);
  }, 120_000);
});
