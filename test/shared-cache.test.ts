/**
 * The fleet asks once (docs/response-cache.md "Shared tier"): three sidecar processes (the bundle)
 * with `CACHE_SHARED` on one real redis-server, in front of the HTTPS stand-in. The three members
 * serve every test of the file, each test asking its own paths; the test that stops Redis is last.
 */
import { request } from 'undici';
import { beforeAll, describe, expect, it } from 'vitest';
import { useStandinFleet } from './helpers/standin-fleet.js';
import { metricValue, waitFor, type SidecarProcess } from './helpers/sidecar-process.js';

const fleet = useStandinFleet({ redis: true });

/** The fleet's members, started once for the file. */
let members: SidecarProcess[] = [];

beforeAll(async () => {
  const env = {
    STORE_URL: fleet.redis.url,
    CACHE_SHARED: 'true',
    // `/v1.0/slow/300` (the most specific rule) goes stale after a second, for the
    // stale-while-revalidate test; the other paths stay fresh for every test of the file.
    CACHE_RULES: '/v1.0/echo/=60,/v1.0/slow/=60,/v1.0/slow/300=1',
    CACHE_STALE_WHILE_REVALIDATE_SECONDS: '60',
    LOG_LEVEL: 'info',
  };
  members = await Promise.all([
    fleet.startForFile(env),
    fleet.startForFile(env),
    fleet.startForFile(env),
  ]);
}, 60_000);

async function get(sidecar: SidecarProcess, path: string) {
  const res = await request(`${sidecar.proxyUrl}${path}`);
  const body = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body };
}

/** API requests the stand-in received for `path` (target as sent). */
function asked(path: string): number {
  return fleet.standin.apiRequests.filter((r) => r.url === path).length;
}

describe('the shared cache tier (3 processes, real redis-server)', () => {
  it('one question asked of each member costs the API one request', async () => {
    const path = '/v1.0/echo/one-question?desk=metals';
    // The second member's counters before the question (they count every test's lookups).
    const sample = (result: string) => `oauth_sidecar_cache_requests_total{result="${result}"}`;
    const shared = (result: string) =>
      metricValue(members[1]!, `oauth_sidecar_cache_shared_requests_total{result="${result}"}`);
    const counted = async () => ({
      hit: await metricValue(members[1]!, sample('hit')),
      miss: await metricValue(members[1]!, sample('miss')),
      fromStore: (await shared('hit')) + (await shared('coalesced')),
    });
    const before = await counted();
    const answers = [];
    for (const member of members) answers.push(await get(member, path));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(asked(path)).toBe(1);
    expect(answers[0]!.headers['cache-status']).toMatch(/fwd=uri-miss; stored/);
    expect(answers[1]!.headers['cache-status']).toMatch(/; hit$/);
    expect(answers[2]!.body).toBe(answers[0]!.body);
    // Each member now holds it locally as well.
    expect((await get(members[1]!, path)).headers['cache-status']).toMatch(/; hit$/);
    // The second member's first answer came from the store: a hit, not a miss as well; found in
    // the store at once, or (the first member's write still on its way) after a wait.
    const after = await counted();
    expect(after.hit - before.hit).toBe(2);
    expect(after.miss - before.miss).toBe(0);
    expect(after.fromStore - before.fromStore).toBe(1);
  });

  it('the same new question from all three at once (10 each, 1 s upstream) costs one request', async () => {
    const path = '/v1.0/slow/1000?burst=1';
    const all = members.flatMap((member) => Array.from({ length: 10 }, () => get(member, path)));
    const answers = await Promise.all(all);
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(asked(path)).toBeLessThanOrEqual(2);
    expect(asked(path)).toBeGreaterThanOrEqual(1);
  });

  it('keeps no body, path or query in clear in the store', async () => {
    const [member] = members;
    const path = '/v1.0/echo/clear-text-probe?account=zebra-7731';
    expect((await get(member!, path)).status).toBe(200);
    await waitFor(
      async () => [...(await fleet.redis.dump()).keys()].some((k) => k.includes(':cache:')),
      10_000,
      'a cache entry in the store',
    );
    const dump = [...(await fleet.redis.dump()).entries()].flat().join('\n');
    for (const clear of [
      'clear-text-probe',
      'zebra-7731',
      '/v1.0/echo',
      'demo-secret',
      'demo-client',
    ]) {
      expect(dump).not.toContain(clear);
    }
  });

  it('stale-while-revalidate: the fleet sends one refresh, and every member then has the new entry', async () => {
    const path = '/v1.0/slow/300?fleet-swr=1';
    for (const member of members) expect((await get(member, path)).status).toBe(200);
    expect(asked(path)).toBe(1);
    // Once stale everywhere, five requests to each member at once: stale answers, one refresh.
    await waitFor(
      async () => /ttl=-/.test(String((await get(members[0]!, path)).headers['cache-status'])),
      10_000,
      'a stale answer',
    );
    const all = await Promise.all(
      members.flatMap((member) => Array.from({ length: 5 }, () => get(member, path))),
    );
    expect(all.every((a) => a.status === 200)).toBe(true);
    await waitFor(
      async () => {
        const answers = await Promise.all(members.map((member) => get(member, path)));
        return answers.every((a) => /; hit$/.test(String(a.headers['cache-status'])));
      },
      10_000,
      'the refreshed entry on every member',
    );
    expect(asked(path)).toBe(2);
  });

  it('answers every request with Redis stopped, and shares again within 10 s of its restart', async () => {
    const [one, two] = members;
    const known = '/v1.0/echo/before-the-outage';
    expect((await get(one!, known)).status).toBe(200);
    await fleet.redis.stop();
    try {
      // The local tier still answers what it holds; the API answers the rest.
      expect((await get(one!, known)).headers['cache-status']).toMatch(/; hit$/);
      for (const member of [one!, two!]) {
        const during = await get(member, '/v1.0/echo/during-the-outage');
        expect(during.status).toBe(200);
      }
      expect((await get(two!, known)).status).toBe(200);
    } finally {
      await fleet.redis.start();
    }
    let round = 0;
    await waitFor(
      async () => {
        round += 1;
        const path = `/v1.0/echo/after-the-outage?round=${round}`;
        await get(one!, path);
        await get(two!, path);
        return asked(path) === 1;
      },
      10_000,
      'a question asked of two members reaching the API once',
    );
  });
});
