/**
 * The quota guard fleet-wide (docs/quota-guard.md): two real sidecar processes, one real
 * redis-server, the HTTPS stand-in as the upstream. They share one bucket and one cooldown; with
 * the store stopped each limits alone and no request fails because of the store.
 */
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, startStandin, type Standin } from '../src/standin/index.js';
import { startRedisServer, type RedisServer } from './helpers/redis-server.js';
import {
  startSidecarProcess,
  waitFor,
  waitReady,
  writeTemp,
  type SidecarProcess,
} from './helpers/sidecar-process.js';
import { realClock } from './helpers/wait.js';

const refills = realClock(
  'a shared bucket of 6 a minute refills on the real clock while the burst runs',
);

let standin: Standin;
let redis: RedisServer;
let caFile: string;
let sidecars: SidecarProcess[] = [];
const client = new Agent({ connections: 64 });

beforeAll(async () => {
  const pki = await createTestPki();
  standin = await startStandin({ pki });
  caFile = writeTemp('ca.pem', pki.caCert);
  redis = await startRedisServer();
});

afterEach(async () => {
  await Promise.all(sidecars.map((s) => s.stop()));
  sidecars = [];
});

afterAll(async () => {
  await client?.close();
  await redis?.close(); // undefined when redis-server is missing: its own error says so
  await standin?.close();
});

async function fleet(env: Record<string, string>, prefix: string): Promise<SidecarProcess[]> {
  const base = {
    UPSTREAM_BASE_URL: standin.url,
    UPSTREAM_CA_FILE: caFile,
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: 'demo-secret',
    TOKEN_STORE_URL: redis.url,
    TOKEN_STORE_KEY_PREFIX: prefix,
    ...env,
  };
  sidecars = await Promise.all([startSidecarProcess(base), startSidecarProcess(base)]);
  await Promise.all(sidecars.map((s) => waitReady(s)));
  return sidecars;
}

interface Answer {
  status: number;
  code: string | undefined;
}

async function get(sidecar: SidecarProcess, path: string): Promise<Answer> {
  const res = await request(`${sidecar.proxyUrl}${path}`, { dispatcher: client });
  const text = await res.body.text();
  let code: string | undefined;
  try {
    code = (JSON.parse(text) as { errors?: { code: string }[] }).errors?.[0]?.code;
  } catch {
    code = undefined;
  }
  return { status: res.statusCode, code };
}

interface QuotaStatus {
  cooldown: { status: number; secondsLeft: number } | null;
  rateLimit: { tokens: number; queued: number } | null;
  fleet: 'off' | 'store' | 'local';
}

async function quotaStatus(sidecar: SidecarProcess): Promise<QuotaStatus> {
  const res = await request(`${sidecar.adminUrl}/status`, { dispatcher: client });
  const status = (await res.body.json()) as { quota: QuotaStatus; store?: { up: boolean } };
  // One health: /status never shows the store up while the guard limits alone (while the first
  // connection is being made the guard waits for the store, and the store is not up yet).
  if (status.store?.up === true) expect(status.quota.fleet).toBe('store');
  return status.quota;
}

function seen(marker: string): number {
  return standin.apiRequests.filter((r) => r.url.includes(marker)).length;
}

/** 15 requests to each process at once. */
async function burst(marker: string): Promise<Answer[][]> {
  return Promise.all(
    sidecars.map((s, p) =>
      Promise.all(
        Array.from({ length: 15 }, (_, i) => get(s, `/v1.0/contracts/?${marker}=${p}-${i}`)),
      ),
    ),
  );
}

describe('fleet-wide quota with a real redis-server', () => {
  it('two processes share one bucket: their sum stays within the limit', async () => {
    // 6 a minute: one slot every 10 s, so the test sees the bucket and at most one refill.
    await fleet({ UPSTREAM_RATE_LIMIT: '6/m', UPSTREAM_QUEUE_MS: '200' }, 'fleet-a:');
    const [one, two] = sidecars;
    expect((await quotaStatus(one!)).fleet).toBe('store');
    const watch = refills.stopwatch();
    const answers = await burst('shared');
    const elapsed = watch.ms();
    const ok = answers.flat().filter((a) => a.status === 200).length;
    const refused = answers.flat().filter((a) => a.status === 429);
    expect(ok + refused.length).toBe(30);
    for (const a of refused) expect(a.code).toBe('rate_limited');
    const allowed = 6 + Math.floor(elapsed / 10_000);
    expect(ok).toBeGreaterThanOrEqual(6);
    expect(ok).toBeLessThanOrEqual(allowed);
    expect(seen('shared=')).toBe(ok);
    // Both processes read the same (empty) bucket.
    expect((await quotaStatus(two!)).rateLimit?.tokens).toBe(0);
  });

  it('a cooldown taken by one process applies to the other', async () => {
    await fleet({}, 'fleet-b:');
    const [one, two] = sidecars;
    const first = await get(one!, '/v1.0/status/429?retry-after=30');
    expect(first.status).toBe(429);
    await waitFor(
      async () => (await quotaStatus(two!)).cooldown !== null,
      5_000,
      'the cooldown on the second process',
    );
    const before = seen('fleet-cooldown');
    const refused = await get(two!, '/v1.0/contracts/?fleet-cooldown');
    expect(refused).toEqual({ status: 429, code: 'upstream_rate_limited' });
    expect(seen('fleet-cooldown')).toBe(before);
  });

  it('with Redis stopped each process limits alone, and no request fails because of the store', async () => {
    await fleet({ UPSTREAM_RATE_LIMIT: '5/m', UPSTREAM_QUEUE_MS: '200' }, 'fleet-c:');
    await redis.stop();
    try {
      const answers = await burst('alone');
      for (const [p, list] of answers.entries()) {
        const ok = list.filter((a) => a.status === 200).length;
        const refused = list.filter((a) => a.status !== 200);
        // Each process's own bucket of 5 (a refill takes 12 s).
        expect(ok, `process ${p}`).toBeGreaterThanOrEqual(5);
        expect(ok, `process ${p}`).toBeLessThanOrEqual(6);
        for (const a of refused) expect(a).toEqual({ status: 429, code: 'rate_limited' });
      }
      for (const s of sidecars) {
        await waitFor(async () => (await quotaStatus(s)).fleet === 'local', 5_000, 'fleet local');
      }
    } finally {
      await redis.start();
    }
    // Back to the store within a few polls.
    for (const s of sidecars) {
      await waitFor(async () => (await quotaStatus(s)).fleet === 'store', 10_000, 'fleet store');
    }
  });
});
