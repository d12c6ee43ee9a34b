/**
 * The abuse floods against the real sidecar process in the container's runtime (the
 * Dockerfile's NODE_OPTIONS heap cap, GLIBC_TUNABLES and ENTRYPOINT node flags): one connection
 * pipelining 20,000 GETs, and 20,000 h2 streams opened and reset at once. The process must stay
 * alive, the upstream see at most `upstream.maxConnections` connections, RSS stay under 250 MiB,
 * /metrics and other clients be answered meanwhile, and most reset streams never be forwarded.
 * How long the other clients waited is a figure: bench/hostile-load.mjs measures it.
 */
import { readFileSync } from 'node:fs';
import { connect as connectH2, constants as h2 } from 'node:http2';
import { connect } from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import {
  startSidecarProcess,
  waitFor,
  waitReady,
  type SidecarProcess,
} from './helpers/sidecar-process.js';
import { useLimitsFixture } from './helpers/limits-fixture.js';
import { SHIPPED_ENV, SHIPPED_NODE_FLAGS } from './helpers/shipped-runtime.js';

const MIB = 1024 * 1024;
const MAX_CONNECTIONS = 16;

const fixture = useLimitsFixture(
  { clientId: 'flood', clientSecret: 'flood-secret' },
  (req, res, done) => {
    const answer = (): void => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ path: req.url }));
      done();
    };
    // The pipelined flood is handled one request at a time: its answers come at once, or 20,000
    // of them would take 20,000 upstream delays. The h2 storm's answers are still in progress
    // when their streams are reset.
    if (req.url === '/v1.0/flood') answer();
    else setTimeout(answer, 5);
  },
);

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
}

async function sidecar(extra: Record<string, string> = {}): Promise<SidecarProcess> {
  const process = await startSidecarProcess(
    {
      ...SHIPPED_ENV,
      ...fixture.env(),
      UPSTREAM_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
      LOG_LEVEL: 'warn',
      ...extra,
    },
    [],
    SHIPPED_NODE_FLAGS,
  );
  await waitReady(process);
  return process;
}

/** One GET on an h2 session; resolves with its status. */
function h2Status(session: ReturnType<typeof connectH2>, path: string): Promise<number> {
  const stream = session.request({ ':path': path });
  stream.resume();
  return new Promise<number>((resolve) =>
    stream.once('response', (headers) => resolve(Number(headers[':status']))),
  );
}

/** /metrics and a client's GET: both answered (generous timeouts: a loaded machine is slow). */
async function probe(
  s: SidecarProcess,
  other: () => Promise<number> = async () => {
    const res = await request(`${s.proxyUrl}/v1.0/other`, { headersTimeout: 30_000 });
    await res.body.text();
    return res.statusCode;
  },
): Promise<void> {
  const metrics = await request(`${s.adminUrl}/metrics`, { headersTimeout: 30_000 });
  await metrics.body.text();
  expect(metrics.statusCode).toBe(200);
  expect(await other()).toBe(200);
}

describe('floods under the container heap cap', () => {
  it('one connection pipelining 20,000 GETs', async () => {
    const s = await sidecar({ LOG_LEVEL: 'info' });
    // LOG_LEVEL info: the helper waits for the listening line; it is the shipped default too.
    const pid = s.child.pid!;
    const connectionsBefore = fixture.upstream.connections;
    const port = Number(new URL(s.proxyUrl).port);
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    let answers = 0;
    let tail = '';
    socket.on('data', (chunk: Buffer) => {
      const text = tail + chunk.toString('latin1');
      answers += text.split('HTTP/1.1 200 ').length - 1;
      tail = text.slice(-16);
    });
    socket.write('GET /v1.0/flood HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(20_000));
    let peak = 0;
    let probes = 0;
    while (answers < 20_000) {
      expect(s.child.exitCode).toBeNull();
      peak = Math.max(peak, rssOf(pid));
      await probe(s);
      probes += 1;
    }
    expect(probes).toBeGreaterThan(0);
    socket.destroy();
    expect(s.child.exitCode).toBeNull();
    expect(fixture.upstream.connections - connectionsBefore).toBeLessThanOrEqual(MAX_CONNECTIONS);
    expect(peak).toBeLessThan(250 * MIB);
    expect(await s.stop()).toBe(0);
  }, 300_000);

  it('20,000 h2 streams opened and reset at once are not forwarded', async () => {
    const s = await sidecar({ LOG_LEVEL: 'info', PROXY_HTTP2: 'true' });
    const pid = s.child.pid!;
    const requestsBefore = fixture.upstream.requests;
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
    // 200 sessions × 100 streams (each session's limit): every HEADERS frame is sent and
    // followed by its RST_STREAM. (One session with 20,000 queued streams stalls Node 24's own
    // http2 client, with or without the sidecar.)
    const sessions: ReturnType<typeof connectH2>[] = [];
    for (let n = 0; n < 200; n++) {
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
        return /\noauth_sidecar_requests_in_flight 0\n/.test(await res.body.text());
      },
      // Each of the 20,000 costs a handler run (or an `overloaded` answer to a gone stream);
      // under a full parallel test run on 2 cores that takes tens of seconds.
      90_000,
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
    const peak = rssOf(pid);
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
    const forwarded = fixture.upstream.requests - requestsBefore - 2; // minus the one after the storm and the probe
    // Most reset streams are never sent; how many were is a figure (bench/hostile-load.mjs,
    // 0.9k-3.4k depending on the Node version and the load). Half of them sent would mean
    // the sidecar no longer looks for resets before it sends.
    expect(forwarded).toBeLessThan(10_000);
    clearInterval(sampler);
    // Aborting an HTTP/1.1 request in flight costs its connection; open at once: at most the cap.
    expect(maxOpen).toBeLessThanOrEqual(MAX_CONNECTIONS);
    expect(peak).toBeLessThan(250 * MIB);
    expect(await s.stop()).toBe(0);
  }, 300_000);
});
