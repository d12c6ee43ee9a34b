/**
 * A member that starts while its store cannot be used (docs/token-store.md "What happens when it
 * fails"): sidecar processes (the bundle) against a real Redis Cluster with a master dead, real
 * Sentinels asked with a wrong or missing password or a data node named in their place, and a
 * real `redis-server` whose ACL user may not run scripts. Each member serves every request, says
 * once which store it cannot use and why, and joins the fleet when the store answers. Then a
 * fail-over during a renewal.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  sentinelEnv,
  startClusterAndSentinels,
  type ClusterAndSentinels,
  type RedisCluster,
  type RedisSentinels,
} from './helpers/redis-topologies.js';
import { useStandinFleet } from './helpers/standin-fleet.js';
import { realClock } from './helpers/wait.js';
import {
  metricValue,
  readyInTests,
  storeStatus,
  waitFor,
  type SidecarProcess,
} from './helpers/sidecar-process.js';

/**
 * 6 s tokens renewed 3 s before expiry (the 60 s default margin, capped at half the lifetime):
 * several renewals within one test.
 */
const fleet = useStandinFleet({ redis: true, tokenLifetimeSeconds: 6 });
const SENTINEL_PASSWORD = 'sentinel-pw-41f0';
let topologies: ClusterAndSentinels | undefined;

// One cluster and one Sentinel setup for the file, started side by side. A test that breaks one
// mends it (the cluster's dead master is started again), except the fail-over, which kills the
// primary: it is the file's last test.
beforeAll(async () => {
  topologies = await startClusterAndSentinels({
    cluster: { masters: 3 },
    sentinels: { sentinelPassword: SENTINEL_PASSWORD },
  });
}, 120_000);

afterAll(async () => {
  await topologies?.close();
});

const cluster = (): RedisCluster => readyInTests(topologies, 'the topologies').cluster;
const sentinels = (): RedisSentinels => readyInTests(topologies, 'the topologies').sentinels;

/** The token set, the shared cache tier and the fleet quota: every use of the store. */
const SHARED = {
  CACHE_SHARED: 'true',
  CACHE_RULES: '/v1.0/echo/=60',
  UPSTREAM_RATE_LIMIT: '1000/s',
  LOG_LEVEL: 'info',
  // A verdict changes at a health check: 200 ms apart, a change shows within a fraction of a second.
  STORE_HEALTH_CHECK_INTERVAL_MS: String(200),
};
/** Starting members, and waiting for renewals and fail-overs: well within this. */
const TEST_TIMEOUT_MS = 120_000;
/** The contract's bound: 30 GETs answered within 20 s of a member's start. */
const START_BOUND_MS = 20_000;
const startBound = realClock(
  'a member started while its store cannot be used answers 30 GETs within 20 s of its start',
);

interface StoreLine {
  level: string;
  up: boolean;
  store: string;
  mode: string;
  error?: string;
}

/** The member's `event: store` log lines (the connection's verdicts). */
function storeLines(member: SidecarProcess): StoreLine[] {
  return member.stdout
    .filter((line) => line.includes('"event":"store"') && line.includes('"up":'))
    .map((line) => JSON.parse(line) as StoreLine);
}

let question = 0;

/** 30 GETs at once, each a new question (a shared-cache miss and a fleet quota decision). */
async function thirtyGets(member: SidecarProcess): Promise<number[]> {
  return Promise.all(
    Array.from({ length: 30 }, async () => {
      const res = await request(`${member.proxyUrl}/v1.0/echo/start-${process.pid}-${question++}`);
      await res.body.dump();
      return res.statusCode;
    }),
  );
}

/** The bearer each member sends now: one tagged request through each, read at the stand-in. */
async function bearers(members: SidecarProcess[]): Promise<string[]> {
  const tags = await Promise.all(
    members.map(async (member, i) => {
      const tag = `bearer-${i}-${question++}`;
      const res = await request(`${member.proxyUrl}/v1.0/contracts/`, {
        headers: { 'x-request-id': tag },
      });
      await res.body.dump();
      return tag;
    }),
  );
  return tags.map(
    (tag) =>
      fleet.standin.apiRequests.find((r) => r.headers['x-request-id'] === tag)?.token ?? 'none',
  );
}

/** A new question through `members` in turn: true when the API was asked it once (shared). */
async function sharedOnce(members: SidecarProcess[]): Promise<boolean> {
  const path = `/v1.0/echo/shared-${process.pid}-${question++}`;
  for (const member of members) {
    const res = await request(`${member.proxyUrl}${path}`);
    await res.body.dump();
    if (res.statusCode !== 200) return false;
  }
  return fleet.standin.apiRequests.filter((r) => r.url === path).length === 1;
}

/** A member started with `env`, the store it is to name in its warn line, and the cause. */
interface Unusable {
  env: Record<string, string>;
  storeHost: string;
  cause: RegExp;
}

/** Start the members at once and check each: 30 GETs all 200 within the bound, one line naming the store. */
async function expectServedAlone(mode: string, cases: Unusable[]): Promise<SidecarProcess[]> {
  // Real processes and a real store: the bound is on the wall clock from the start.
  const watch = startBound.stopwatch();
  const members = await Promise.all(cases.map(({ env }) => fleet.start(env)));
  const statuses = await Promise.all(members.map(thirtyGets));
  const elapsed = watch.ms();
  for (const [i, member] of members.entries()) {
    const others = member.stdout.filter((line) => !line.includes('"status":200'));
    expect(statuses[i], others.join('\n')).toEqual(Array.from({ length: 30 }, () => 200));
    const down = storeLines(member).filter((l) => !l.up);
    expect(down, member.stdout.join('\n')).toHaveLength(1);
    expect(down[0]).toMatchObject({ level: 'warn', mode });
    expect(down[0]!.store).toContain(cases[i]!.storeHost);
    expect(down[0]!.error).toMatch(cases[i]!.cause);
    expect((await storeStatus(member)).up).toBe(false);
  }
  expect(elapsed).toBeLessThan(START_BOUND_MS);
  return members;
}

/** Two members sending one token: each sends a tagged request until both send the same one. */
async function oneSharedToken(members: SidecarProcess[], what: string): Promise<void> {
  await waitFor(
    async () => {
      const [a, b] = await bearers(members);
      return a === b && a !== 'none';
    },
    30_000,
    what,
  );
}

describe('a member started while its store cannot be used serves every request', () => {
  it(
    'STORE_MODE=cluster with one of three masters dead: 30 GETs all 200, one warn line; the master back → it joins the fleet',
    async () => {
      const store = cluster();
      // Not one of the two seed nodes the URL names: discovery works, the cluster is not whole.
      const dead = store.ports[2]!;
      await store.kill(dead);
      const env = { STORE_MODE: 'cluster', STORE_URL: store.url, ...SHARED };
      const [member] = await expectServedAlone('cluster', [
        {
          env,
          storeHost: `127.0.0.1:${store.ports[0]}`,
          cause: new RegExp(`ECONNREFUSED 127.0.0.1:${dead}|CLUSTERDOWN`),
        },
      ]);

      const alone = member!;

      // The store fixed: the member joins without a restart and shares with a newcomer, started
      // while it joins.
      await store.restart(dead);
      await store.waitHealthy();
      const [newcomer] = await Promise.all([
        fleet.start(env),
        // Up in /status and in its last store line: the line reaches the captured stdout after
        // the status has changed, so both are waited for.
        waitFor(
          async () => (await storeStatus(alone)).up && storeLines(alone).at(-1)?.up === true,
          20_000,
          'the member to join, and its store line to say so',
        ),
      ]);
      // One line per change of verdict (the health check names a key, so a healing cluster's
      // CLUSTERDOWN keeps it down rather than up between failed scripts).
      const verdicts = storeLines(alone).map((l) => l.up);
      expect(verdicts.at(-1)).toBe(true);
      expect(verdicts.every((up, i) => i === 0 || up !== verdicts[i - 1])).toBe(true);
      await waitFor(() => sharedOnce([alone, newcomer]), 20_000, 'the cache to be shared');
      // One token for both within a few renewals: adopted from, or published to, the store.
      await oneSharedToken([alone, newcomer], 'one shared token');
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'STORE_MODE=sentinel with a wrong or missing sentinel password, or a data node named: all 200, one warn line each',
    async () => {
      const env = { ...sentinelEnv(sentinels()), ...SHARED };
      const sentinelHost = sentinels().url.replace('redis://', '').split(',')[0]!;
      const primary = await sentinels().primary();
      const [wrong, missing] = await expectServedAlone('sentinel', [
        {
          env: { ...env, STORE_SENTINEL_PASSWORD: 'wrong-pw-8c2d' },
          storeHost: sentinelHost,
          cause: /^(WRONGPASS|NOAUTH) /,
        },
        { env, storeHost: sentinelHost, cause: /^(WRONGPASS|NOAUTH) / },
        {
          env: { ...env, STORE_URL: `redis://127.0.0.1:${primary}` },
          storeHost: `127.0.0.1:${primary}`,
          cause: /names a data node, not a sentinel/,
        },
      ]);
      for (const member of [wrong!, missing!]) {
        const output = [...member.stdout, ...member.stderr].join('\n');
        expect(output).not.toContain('wrong-pw-8c2d');
        expect(output).not.toContain(SENTINEL_PASSWORD);
      }
    },
    TEST_TIMEOUT_MS,
  );
});

describe('one verdict per state change', () => {
  it(
    'an ACL user without EVALSHA: one down line, token_store_up 0 at every look over 5 health checks, every request 200',
    async () => {
      const redis = fleet.redis;
      await redis.command(
        ...['ACL', 'SETUSER', 'noscripts', 'reset', 'on', '>noscripts-pw-5e'],
        ...['~*', '&*', '+@all', '-evalsha'],
      );
      try {
        const member = await fleet.start({
          STORE_URL: `redis://noscripts:noscripts-pw-5e@127.0.0.1:${redis.port}`,
          ...SHARED,
        });
        const ups = new Set<number>();
        const statuses = new Set<number>();
        // 20 looks 50 ms apart (pacing), each a request and a read of /metrics: over 1 s, 5
        // periods of the 200 ms health check, each of which used to mark the store up (its PING
        // answered) until the next script failed.
        for (let i = 0; i < 20; i++) {
          const res = await request(`${member.proxyUrl}/v1.0/echo/acl-${question++}`);
          await res.body.dump();
          statuses.add(res.statusCode);
          ups.add(await metricValue(member, 'oauth_sidecar_token_store_up'));
          await realClock(
            'looks at a store refusing scripts across several of the sidecar process’s health checks',
          ).sleep(50);
        }
        expect([...statuses]).toEqual([200]);
        expect([...ups]).toEqual([0]);
        const lines = storeLines(member);
        expect(
          lines.filter((l) => !l.up),
          member.stdout.join('\n'),
        ).toHaveLength(1);
        expect(lines.filter((l) => l.up)).toHaveLength(0);
        expect(lines[0]!.error).toMatch(/NOPERM/);
      } finally {
        await redis.command('ACL', 'DELUSER', 'noscripts');
      }
    },
    TEST_TIMEOUT_MS,
  );
});

describe('a fail-over during a renewal', () => {
  it(
    'Sentinel: the primary killed while 6 s tokens renew under load: every request 200; one shared token again after',
    async () => {
      const store = sentinels();
      const env = { ...sentinelEnv(store), STORE_SENTINEL_PASSWORD: SENTINEL_PASSWORD, ...SHARED };
      const members = await Promise.all([fleet.start(env), fleet.start(env)]);
      const statuses = new Map<string, number>();
      let running = true;
      const loops = members.map(async (member) => {
        while (running) {
          let key: string;
          try {
            const res = await request(`${member.proxyUrl}/v1.0/contracts/`);
            await res.body.dump();
            key = String(res.statusCode);
          } catch (error) {
            key = error instanceof Error ? error.message : String(error);
          }
          statuses.set(key, (statuses.get(key) ?? 0) + 1);
          await realClock('steady load on the sidecar processes at a fixed pace').sleep(50);
        }
      });
      try {
        // Kill the primary when a renewal is due: right after a grant, the next is 3 s away, and
        // a Sentinel fail-over (down-after 1 s plus the election) spans it.
        const issued = () =>
          fleet.standin.tokenRequests.filter((r) => r.outcome === 'issued').length;
        const before = issued();
        await waitFor(() => issued() > before, 15_000, 'a renewal');
        const primary = await store.primary();
        await store.kill(primary);
        await waitFor(async () => (await store.primary()) !== primary, 30_000, 'a promotion');
        await oneSharedToken(members, 'one shared token again');
      } finally {
        running = false;
        await Promise.all(loops);
      }
      expect(Object.fromEntries(statuses)).toEqual({ '200': expect.any(Number) });
      const output = members.flatMap((m) => [...m.stdout, ...m.stderr]).join('\n');
      for (const token of fleet.standin.issuedTokens()) expect(output).not.toContain(token);
      expect(output).not.toContain(SENTINEL_PASSWORD);
    },
    TEST_TIMEOUT_MS,
  );
});
