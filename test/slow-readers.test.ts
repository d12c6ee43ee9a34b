/**
 * docs/design.md "Bounded work": clients that read their answer slowly, against the built bundle.
 * Debian's `slowhttptest -X` opens 1,000 connections that ask for a 1 MB answer and read it
 * through a 512–1024-byte receive window, 32 bytes every 5 s; meanwhile normal GETs are answered,
 * slow readers are cut, and the sidecar (the image's runtime settings) stays under 250 MiB. How
 * fast the normal GETs are answered is a figure of bench/hostile-load.mjs. Each connection
 * pipelines 3 requests (`-k 3`); they are handled one after another, so the attack reaches the
 * upstream about once per connection, not three times. A client that only pauses its socket is
 * not enough on loopback: the kernel's buffers take a 1 MB answer whole, so slowhttptest's small
 * window is what makes the reader slow.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { startSidecarProcess, waitFor, waitReady } from './helpers/sidecar-process.js';
import { useLimitsFixture } from './helpers/limits-fixture.js';
import { SHIPPED_ENV, SHIPPED_NODE_FLAGS } from './helpers/shipped-runtime.js';

const BIG = Buffer.alloc(1024 * 1024, 'x');

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

/** The resident set of process `pid` in MiB (/proc/<pid>/status). */
function rssMiB(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
}

describe('slow readers', () => {
  it('slowhttptest -X against a 1 MB answer leaves room for normal GETs', async () => {
    const missing = missingSlowhttptest();
    if (missing !== undefined) throw new Error(missing);
    // As the image runs it (its heap caps): the RSS bound is about what ships.
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
      const pid = s.child.pid!;
      attack = spawn(
        'slowhttptest',
        [
          ...['-c', '1000', '-X', '-r', '200', '-w', '512', '-y', '1024', '-n', '5', '-z', '32'],
          ...['-k', '3', '-l', '40', '-u', `${s.proxyUrl}/v1.0/big/file`],
        ],
        { stdio: 'ignore' },
      );
      // The attack is on once a hundred of its requests reached the upstream.
      const before = bigRequests;
      await waitFor(() => bigRequests - before >= 100, 60_000, '100 slow readers answered');
      let maxRss = rssMiB(pid);
      const watch = setInterval(() => (maxRss = Math.max(maxRss, rssMiB(pid))), 250);
      try {
        for (let i = 0; i < 5; i++) {
          // 30 s to connect and to answer: a limit for a hang on a loaded 2-core machine, where a
          // SYN behind the attack's 1,000 connections can wait past undici's default 10 s.
          const res = await request(`${s.proxyUrl}/v1.0/normal/${i}`, {
            dispatcher: patient,
            headersTimeout: 30_000,
          });
          await res.body.dump();
          expect(res.statusCode).toBe(200);
        }
        // Readers too slow for `proxy.minBodyBytesPerSecond` are cut.
        await waitFor(
          () => s.stdout.some((line) => line.includes('"result":"client_too_slow"')),
          60_000,
          'a slow reader cut as client_too_slow',
        );
      } finally {
        clearInterval(watch);
      }
      const attackRequests = bigRequests - before;
      expect(maxRss).toBeLessThan(250);
      // 1,000 connections, one request each at a time (a few reconnect after a cut).
      expect(attackRequests).toBeLessThan(1_500);
      expect(s.child.exitCode).toBeNull();
    } finally {
      attack?.kill('SIGKILL');
      await s.stop('SIGKILL');
    }
  }, 240_000);
});
