/**
 * The abuse floods against the real sidecar process in the container's runtime (the
 * Dockerfile's NODE_OPTIONS heap cap, GLIBC_TUNABLES and ENTRYPOINT node flags): one connection
 * pipelining 20,000 GETs, and 20,000 h2 streams opened and reset at once. The process must stay
 * alive, the upstream see at most `upstream.maxConnections` connections, RSS stay under 250 MiB,
 * and /metrics and other clients be answered within 2 s; a stream reset before it was sent
 * upstream is not forwarded.
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
/** Node 24 runs in the container image; the storm's figures are bounded tighter there. */
const CONTAINER_RUNTIME = Number(process.versions.node.split('.')[0]) >= 24;
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

/** /metrics and a client's GET, each timed; both must answer within 2 s. */
async function probe(
  s: SidecarProcess,
  other: () => Promise<number> = async () => {
    const res = await request(`${s.proxyUrl}/v1.0/other`, { headersTimeout: 10_000 });
    await res.body.text();
    return res.statusCode;
  },
): Promise<{ metricsMs: number; otherMs: number }> {
  let started = Date.now();
  const metrics = await request(`${s.adminUrl}/metrics`, { headersTimeout: 5_000 });
  await metrics.body.text();
  const metricsMs = Date.now() - started;
  expect(metrics.statusCode).toBe(200);
  started = Date.now();
  expect(await other()).toBe(200);
  return { metricsMs, otherMs: Date.now() - started };
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
    const probes: { metricsMs: number; otherMs: number }[] = [];
    while (answers < 20_000) {
      expect(s.child.exitCode).toBeNull();
      peak = Math.max(peak, rssOf(pid));
      probes.push(await probe(s));
      await waitFor(() => true, 10, 'a tick');
    }
    socket.destroy();
    expect(s.child.exitCode).toBeNull();
    expect(fixture.upstream.connections - connectionsBefore).toBeLessThanOrEqual(MAX_CONNECTIONS);
    expect(peak).toBeLessThan(250 * MIB);
    for (const p of probes) {
      expect(p.metricsMs).toBeLessThan(2_000);
      expect(p.otherMs).toBeLessThan(2_000);
    }
    expect(await s.stop()).toBe(0);
  }, 120_000);

  it('20,000 h2 streams opened and reset at once are not forwarded', async () => {
    const s = await sidecar({ LOG_LEVEL: 'info', PROXY_HTTP2: 'true' });
    const pid = s.child.pid!;
    const requestsBefore = fixture.upstream.requests;
    await waitFor(
      () => fixture.upstream.open === 0,
      10_000,
      'the previous test’s connections to close',
    );
    // Sampled every 10 ms from the kernel's table: the upstream's own count of open sockets lags
    // while its process is busy (a connection undici dropped after an aborted request is still
    // counted until its close is handled), which made this check flaky under a full parallel run.
    // Only the sidecar's own sockets count: a sidecar of a parallel test may dial a port its
    // closed upstream had. CI once counted 23 from every process; every process's count is
    // printed beside the sidecar's so a recurrence shows whose they were.
    let maxOpen = 0;
    let maxOpenAnyProcess = 0;
    const sampler = setInterval(() => {
      maxOpen = Math.max(maxOpen, fixture.upstream.establishedClients(pid));
      maxOpenAnyProcess = Math.max(
        maxOpenAnyProcess,
        fixture.upstream.establishedClients(undefined),
      );
    }, 10);
    // Probed while the storm runs: /metrics within 2 s, another client answered too. An
    // `overloaded` 503 is an answer too (more than maxInFlight streams may be in progress then).
    const during: { metricsMs: number; otherMs: number; status: number }[] = [];
    let storming = true;
    const prober = (async () => {
      while (storming) {
        let started = Date.now();
        const metrics = await request(`${s.adminUrl}/metrics`, { headersTimeout: 5_000 });
        await metrics.body.text();
        const metricsMs = Date.now() - started;
        started = Date.now();
        const other = connectH2(s.proxyUrl);
        other.on('error', () => undefined);
        const status = await h2Status(other, '/v1.0/other');
        other.close();
        during.push({ metricsMs, otherMs: Date.now() - started, status });
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
      expect(d.metricsMs).toBeLessThan(2_000);
      // Node 24 (the container's runtime): the slowest was 0.3-0.65 s alone, up to 0.98 s in a
      // full parallel test run on 2 cores (before the handler's wait for resets: 1.7 s and 3.5 s).
      // Node 20 is slower at this storm: 0.8-1.1 s alone, 1.98-2.84 s in CI's parallel runs, and
      // 4.6 s in one on a VM running ~1.5x slower than usual (Node 24 1.68 s in that run).
      expect(d.otherMs).toBeLessThan(CONTAINER_RUNTIME ? 2_000 : 8_000);
      expect([200, 503]).toContain(d.status);
    }
    const session = connectH2(s.proxyUrl);
    session.on('error', () => undefined);
    // Every stream is closed on the client; a normal request on the same session comes after them.
    expect(await h2Status(session, '/v1.0/after-the-storm')).toBe(200);
    const peak = rssOf(pid);
    const p = await probe(s, async () => {
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
    // The sidecar's own time for the other client's requests (its request lines): the probe's
    // figure also holds this test process's own delays (it runs the storm and the upstream).
    const sidecarOtherMs = s.stdout
      .filter((line) => line.includes('"path":"/v1.0/other"'))
      .map((line) => Number(/"durationMs":(\d+)/.exec(line)?.[1] ?? 0));
    console.info(
      `h2 storm: the sidecar's slowest answer to the other client took ${Math.max(...sidecarOtherMs)} ms (${sidecarOtherMs.length} requests)`,
    );
    console.info(
      `h2 storm: ${forwarded} of 20,000 reset streams reached the upstream; at most ${maxOpen} upstream connections at once (${maxOpenAnyProcess} from any process); ${during.length} probes during the storm, slowest /metrics ${Math.max(...during.map((d) => d.metricsMs))} ms, slowest other client ${Math.max(...during.map((d) => d.otherMs))} ms`,
    );
    // Node 24: 0.9k-1.65k alone, up to 2.2k in CI's parallel runs. Node 20: 2.1k-2.5k alone, up to
    // 3.4k in CI.
    expect(forwarded).toBeLessThanOrEqual(CONTAINER_RUNTIME ? 4_000 : 6_000);
    clearInterval(sampler);
    // Aborting an HTTP/1.1 request in flight costs its connection; open at once: at most the cap.
    expect(maxOpen).toBeLessThanOrEqual(MAX_CONNECTIONS);
    expect(peak).toBeLessThan(250 * MIB);
    expect(p.metricsMs).toBeLessThan(2_000);
    expect(p.otherMs).toBeLessThan(2_000);
    expect(await s.stop()).toBe(0);
  }, 180_000);
});
