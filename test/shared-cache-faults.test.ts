/**
 * The shared cache tier on a hostile day (docs/response-cache.md "Shared tier"): sidecar processes
 * (the bundle) on a real redis-server, in front of a scripted HTTPS upstream: a fill leader killed
 * mid-body, answers too large for the store, and every key replaced by a 64 MB value.
 */
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import type { Standin } from '../src/standin/index.js';
import { useFileFixtures } from './helpers/fixtures.js';
import type { RedisServer } from './helpers/redis-server.js';
import {
  startSidecarProcess,
  storeOnceUp,
  waitFor,
  waitReady,
  type SidecarProcess,
} from './helpers/sidecar-process.js';
import { startCountingUpstream, type CountingUpstream } from './helpers/upstream.js';

const CLIENT = { clientId: 'faults-client-5d2e', clientSecret: 'faults-secret-90b1c7' };
const fixtures = useFileFixtures();

interface Setup {
  redis: RedisServer;
  standin: Standin;
  /** Requests the API received, by target. */
  asked: Map<string, number>;
  upstream: CountingUpstream;
}

/** A redis-server, the stand-in's token endpoint, and `answer` as the API. */
async function setup(
  answer: (target: string, nth: number, res: ServerResponse) => void,
): Promise<Setup> {
  const { redis, standin } = await fixtures.redisAndStandin({
    ...CLIENT,
    tokenLifetimeSeconds: 3_600,
  });
  const asked = new Map<string, number>();
  const upstream = await startCountingUpstream(fixtures.pki, (req, res, done) => {
    const target = req.url ?? '';
    const nth = (asked.get(target) ?? 0) + 1;
    asked.set(target, nth);
    res.once('close', done);
    answer(target, nth, res);
  });
  fixtures.cleanup(() => upstream.close());
  return { redis, standin, asked, upstream };
}

async function member(s: Setup, env: Record<string, string> = {}): Promise<SidecarProcess> {
  const sidecar = await startSidecarProcess({
    UPSTREAM_BASE_URL: s.upstream.url,
    UPSTREAM_CA_FILE: fixtures.caFile,
    TOKEN_URL: `${s.standin.url}/oauth/token/`,
    CLIENT_ID: CLIENT.clientId,
    CLIENT_SECRET: CLIENT.clientSecret,
    STORE_URL: s.redis.url,
    CACHE_SHARED: 'true',
    CACHE_RULES: '/v1.0/=60',
    ...env,
  });
  fixtures.cleanup(() => sidecar.stop('SIGKILL'));
  await waitReady(sidecar, 15_000);
  return sidecar;
}

async function get(sidecar: SidecarProcess, path: string) {
  const res = await request(`${sidecar.proxyUrl}${path}`);
  const body = await res.body.text();
  return { status: res.statusCode, body, at: Date.now() };
}

/** A JSON answer of `bytes`, cacheable for a minute. */
function json(bytes: number): string {
  return `{"pad":"${'x'.repeat(Math.max(0, bytes - 10))}"}`;
}

function rssMiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1]) / 1024;
}

async function cacheWaiting(sidecar: SidecarProcess): Promise<number> {
  const status = (await (await request(`${sidecar.adminUrl}/status`)).body.json()) as {
    cache?: { waiting?: number };
  };
  return status.cache?.waiting ?? 0;
}

/** Every key in the store (KEYS *), without reading a value. */
async function storeKeys(redis: RedisServer): Promise<string[]> {
  const raw = await redis.command('KEYS', '*');
  return raw
    .split('\r\n')
    .slice(1)
    .filter((_line, i) => i % 2 === 1);
}

describe('the shared cache tier on a hostile day (bundle, real redis-server)', () => {
  it('a fill leader killed mid-body: the other member’s 10 waiters are answered within 10 s, one more upstream request', async () => {
    const path = '/v1.0/prices/killed-leader';
    const body = json(4_096);
    const s = await setup((_target, nth, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'cache-control': 'max-age=60',
      });
      // The first fill stops half-way (its member is killed then); later ones answer whole.
      if (nth === 1) res.write(body.slice(0, 2_048));
      else setTimeout(() => res.end(body), 200);
    });
    // The old lease (upstream.timeoutMs + upstream.bodyTimeoutMs) would be 40 s here.
    const env = { UPSTREAM_TIMEOUT_MS: '20000', UPSTREAM_BODY_TIMEOUT_MS: '20000' };
    const [leader, other] = await Promise.all([member(s, env), member(s, env)]);
    const leading = get(leader, path).catch(() => undefined);
    await waitFor(() => s.asked.get(path) === 1, 10_000, 'the leader’s fill under way');
    const waiters = Array.from({ length: 10 }, () => get(other, path));
    await waitFor(async () => (await cacheWaiting(other)) === 9, 10_000, '9 local waiters');
    leader.child.kill('SIGKILL');
    const killedAt = Date.now();
    await leading;
    const answers = await Promise.all(waiters);
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(answers.every((a) => a.body === body)).toBe(true);
    expect(Math.max(...answers.map((a) => a.at - killedAt))).toBeLessThan(10_000);
    expect(s.asked.get(path)).toBe(2);
  }, 60_000);

  it('an answer too large for the store gives the lease back at once: three members do not take turns', async () => {
    const path = '/v1.0/prices/too-large';
    const s = await setup((_target, _nth, res) => {
      // No Content-Length: the size shows only as the body streams. 64 KiB, the last half 1 s
      // late: the three requests, sent at once, all arrive while the first fill still streams.
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' });
      res.write('x'.repeat(32 * 1024));
      setTimeout(() => res.end('y'.repeat(32 * 1024)), 1_000);
    });
    const env = { CACHE_MAX_SHARED_ENTRY_BYTES: '16384' };
    const members = await Promise.all([member(s, env), member(s, env), member(s, env)]);
    const answers = await Promise.all(members.map((m) => get(m, path)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers.every((a) => a.body.length === 64 * 1024)).toBe(true);
    // Each member asked the upstream itself (too large for the store), none waited for another's turn.
    expect(s.asked.get(path)).toBe(3);
  }, 60_000);

  it('every key replaced by a 64 MB value: the reader answers 200, RSS < 200 MiB and < 150 MiB within 30 s', async () => {
    const paths = [1, 2, 3, 4].map((n) => `/v1.0/prices/forged-values-${n}`);
    const body = json(2_048);
    const s = await setup((_target, _nth, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' });
      res.end(body);
    });
    const [writer, reader] = await Promise.all([member(s), member(s)]);
    for (const path of paths) expect((await get(writer, path)).status).toBe(200);
    await waitFor(
      async () => (await storeKeys(s.redis)).filter((k) => k.includes(':cache:')).length === 4,
      10_000,
      'the entries in the store',
    );
    const keys = await storeKeys(s.redis);
    const tokenKey = keys.find((k) => k.includes(':token:'));
    expect(tokenKey).toBeDefined();
    // Made on the server (the test does not carry 64 MB per key over a socket): 64 MiB of zeros.
    // Allocating it may outlast the helper's 2 s reply bound on a busy machine: wait for the length.
    const forge =
      "redis.call('DEL', KEYS[1]) return redis.call('SETRANGE', KEYS[1], 67108863, 'A')";
    for (const key of keys) await s.redis.command('EVAL', forge, '1', key).catch(() => undefined);
    await waitFor(
      async () => {
        const lengths = await Promise.all(
          keys.map((k) => s.redis.command('STRLEN', k).catch(() => '')),
        );
        return lengths.every((reply) => reply.trim() === ':67108864');
      },
      60_000,
      'every key 64 MiB',
    );
    // Forging blocks the server for a while: the reader's store is up again before it reads.
    await storeOnceUp(reader, 10_000);
    const readFrom = reader.stdout.length;
    // Sampled until the end: a reply that arrives after its call was given up counts too.
    let peak = 0;
    const pid = reader.child.pid!;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 20);
    try {
      const answers = await Promise.all(paths.map((path) => get(reader, path)));
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
      expect(answers.every((a) => a.body === body)).toBe(true);
      // A member started now finds a forged token entry: it grants and writes a real one over it.
      const late = await member(s);
      expect((await get(late, paths[0]!)).status).toBe(200);
      await waitFor(() => rssMiB(pid) < 150, 30_000, 'the reader’s RSS under 150 MiB');
    } finally {
      clearInterval(sampler);
    }
    expect(peak).toBeLessThan(200);
    // Nothing it read made the store look down (a slow 64 MB reply, a WRONGTYPE error).
    expect(reader.stdout.slice(readFrom).filter((line) => line.includes('"up":false'))).toEqual([]);
    await waitFor(
      async () => /hash/.test(await s.redis.command('TYPE', tokenKey!).catch(() => '')),
      10_000,
      'the token entry replaced',
    );
  }, 90_000);
});
