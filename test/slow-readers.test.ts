/**
 * docs/design.md "Bounded work": clients that read their answer slowly, against the built bundle.
 * Debian's `slowhttptest -X` opens 100 connections that ask for a 1 MB answer and read it
 * through a 512–1024-byte receive window, 32 bytes every 5 s; meanwhile normal GETs are answered
 * and slow readers are cut. Requests not reading may hold half of `upstream.maxConnections` (32
 * of 64): the 100 readers, each holding one while its answer is paused, are three times as many
 * (a normal GET waits for a connection behind the readers' requests: fewer connections would make
 * it wait on their turnover, not on the caps). How fast the normal GETs are answered, and the
 * sidecar's RSS, beside 1,000 readers are figures of bench/hostile-load.mjs. Each connection
 * pipelines 3 requests (`-k 3`); they are handled one after another, so a connection's next
 * request reaches the upstream only once the answer before it was written whole (at 1,000
 * readers about once per connection, not three times). A client that only pauses its socket is
 * not enough on loopback: the kernel's buffers take a 1 MB answer whole, so slowhttptest's small
 * window is what makes the reader slow.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Agent, request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { startSidecarProcess, waitFor, waitReady } from './helpers/sidecar-process.js';
import { useLimitsFixture } from './helpers/limits-fixture.js';
import { SHIPPED_ENV, SHIPPED_NODE_FLAGS } from './helpers/shipped-runtime.js';

const BIG = Buffer.alloc(1024 * 1024, 'x');
const READERS = 100;

/** The normal GETs' client: undici's limits for a hang, not for the sidecar's speed. */
const patient = new Agent({ connect: { timeout: 30_000 } });
afterAll(() => patient.close());

/** Why this test cannot run, or undefined: slowhttptest is a Debian package, not an npm one. */
function missingSlowhttptest(): string | undefined {
  const probe = spawnSync('slowhttptest', ['-h'], { stdio: 'ignore' });
  if (probe.error === undefined) return undefined;
  return `slowhttptest could not be run (${probe.error.message}): apt-get install -y slowhttptest; this test needs it and is not skipped`;
}

/** Requests for the 1 MB answer that reached the upstream. */
let bigRequests = 0;

const fixture = useLimitsFixture(
  { clientId: 'reader', clientSecret: 'reader-secret' },
  (req, res, done) => {
    req.resume();
    res.once('close', done);
    if (req.url?.startsWith('/v1.0/big/') === true) {
      bigRequests += 1;
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(BIG);
    } else {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ path: req.url }));
    }
  },
);

describe('slow readers', () => {
  it('slowhttptest -X with 100 readers of a 1 MB answer: normal GETs answered, readers cut', async () => {
    const missing = missingSlowhttptest();
    if (missing !== undefined) throw new Error(missing);
    // As the image runs it (its heap caps).
    const s = await startSidecarProcess(
      {
        ...SHIPPED_ENV,
        ...fixture.env(),
        LOG_LEVEL: 'info',
      },
      [],
      SHIPPED_NODE_FLAGS,
    );
    let attack: ChildProcess | undefined;
    try {
      await waitReady(s);
      attack = spawn(
        'slowhttptest',
        [
          ...['-c', String(READERS), '-X', '-r', '200', '-w', '512', '-y', '1024', '-n', '5'],
          ...['-z', '32'],
          ...['-k', '3', '-l', '40', '-u', `${s.proxyUrl}/v1.0/big/file`],
        ],
        { stdio: 'ignore' },
      );
      // The attack is on once a fifth of its connections' requests reached the upstream.
      const before = bigRequests;
      await waitFor(() => bigRequests - before >= READERS / 5, 60_000, '20 slow readers answered');
      for (let i = 0; i < 5; i++) {
        // 30 s to connect and to answer: a limit for a hang on a loaded 2-core machine, where a
        // SYN behind the attack's connections can wait past undici's default 10 s.
        const res = await request(`${s.proxyUrl}/v1.0/normal/${i}`, {
          dispatcher: patient,
          headersTimeout: 30_000,
        });
        await res.body.dump();
        expect(res.statusCode).toBe(200);
      }
      // Readers beyond the caps, or too slow for `proxy.minBodyBytesPerSecond`, are cut.
      await waitFor(
        () => s.stdout.some((line) => line.includes('"result":"client_too_slow"')),
        60_000,
        'a slow reader cut as client_too_slow',
      );
      const attackRequests = bigRequests - before;
      // A connection's next request goes upstream only once its previous answer was written
      // whole (the kernel's send buffer may take a 1 MB answer a slow reader never read): the
      // first of each connection, one more per answer completed, and a few reconnects after a
      // cut. The 3 pipelined requests of each sent at once would be 300.
      const completed = s.stdout.filter((line) => {
        if (!line.includes('"path":"/v1.0/big/')) return false;
        const entry = JSON.parse(line) as { status?: number; result?: string };
        return entry.status === 200 && entry.result === undefined;
      }).length;
      expect(attackRequests).toBeLessThanOrEqual(READERS + completed + READERS / 5);
      expect(s.child.exitCode).toBeNull();
    } finally {
      attack?.kill('SIGKILL');
      await s.stop('SIGKILL');
    }
  }, 120_000);
});
