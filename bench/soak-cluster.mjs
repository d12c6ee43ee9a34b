// Soak phase h (bench/soak.mjs): a fail-over of a Redis Cluster under load. A real 3 masters +
// 3 replicas cluster (the tests' starter, test/helpers/redis-topologies.ts), two sidecars with
// STORE_MODE=cluster sharing the token, the cache tier and the quota, steady load through both,
// the master holding the most keys SIGKILLed. Expected: 0 failed requests, and the fleet sharing
// again (a new question through both members costs the API one request) within 20 s of the
// cluster being whole (docs/token-store.md "Redis Cluster and Sentinel").
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { importTypeScript } from './lib.mjs';

/** Sharing again within this of the cluster being whole (the issue's bound). */
const SHARING_BOUND_MS = 20_000;

/**
 * What the phase needs of the soak: its work dir and cleanups, its sidecars (started and ready),
 * a new phase's bookkeeping (`begin`), its load (`rate` requests per second in all, or as fast as
 * the connections go when undefined) and checks.
 *
 * @param {{
 *   work: string, cleanups: (() => unknown)[], concurrency: number, loadSeconds: number,
 *   rate: number | undefined,
 *   startMembers: (name: string, count: number, extra: object) => Promise<any[]>,
 *   begin: (name: string) => any,
 *   startLoad: (origin: string, connections: number, rate?: number) => () => Promise<void>,
 *   check: (ok: boolean, message: string) => void, only: (phase: any, allowed: (key: string) => boolean) => void,
 *   grants: () => number, watch: (phase: any, children: { pid: number, exited: boolean }[]) => () => void,
 * }} soak
 */
export async function clusterPhase(soak) {
  const { startRedisCluster } = await importTypeScript(
    'test/helpers/redis-topologies.ts',
    soak.work,
  );
  const cluster = await startRedisCluster({ masters: 3, replicas: 1 });
  soak.cleanups.push(() => cluster.close());
  const members = await soak.startMembers('cluster', 2, {
    STORE_MODE: 'cluster',
    STORE_URL: cluster.url,
    CACHE_SHARED: 'true',
    CACHE_RULES: '/v1.0/echo/=60',
    // Shared and never reached: each request takes a slot from the fleet's bucket.
    UPSTREAM_RATE_LIMIT: '100000/s',
  });
  const question = sharing(soak, members);
  soak.check(await question(), 'h: a question through both members cost more than one request');
  const phase = soak.begin('h cluster 3+3, busiest master SIGKILLed');
  const grantsBefore = soak.grants();
  const unwatch = soak.watch(
    phase,
    members.map((m) => m.child),
  );
  const per = Math.max(1, Math.floor(soak.concurrency / members.length));
  const rate = soak.rate && soak.rate / members.length;
  const stops = members.map((m) => soak.startLoad(m.origin, per, rate));
  await sleep(soak.loadSeconds * 500);
  const keys = [...(await cluster.keysByMaster()).entries()].sort((a, b) => b[1] - a[1]);
  const busiest = keys[0][0];
  const killedAt = Date.now();
  await cluster.kill(busiest);
  const downSeen = await until(5_000, async () => !(await storeOf(members[0])).up);
  await cluster.waitHealthy();
  const wholeAt = Date.now();
  const shared = await until(SHARING_BOUND_MS, question);
  const sharingMs = Date.now() - wholeAt;
  await sleep(soak.loadSeconds * 500);
  await Promise.all(stops.map((stop) => stop()));
  unwatch();
  phase.renewals = soak.grants() - grantsBefore;
  const stores = await Promise.all(members.map(storeOf));
  phase.sidecarLagMs = 0;
  phase.stopSoakLag();
  soak.only(phase, (k) => /^normal:2\d\d$/.test(k));
  soak.check(
    shared,
    `h: the fleet not sharing ${SHARING_BOUND_MS / 1000} s after the cluster was whole`,
  );
  soak.check(downSeen, 'h: /status did not show the store down within 5 s of the kill');
  for (const [i, store] of stores.entries()) {
    soak.check(store.up, `h: member ${i} does not show the store up at the end`);
    soak.check(
      !store.nodes.includes(`127.0.0.1:${busiest}`),
      `h: member ${i} still names ${busiest}`,
    );
  }
  for (const m of members) soak.check(!m.child.exited, 'h: a member exited');
  phase.notes.push(
    `keys per master ${keys.map(([port, n]) => `${port}:${n}`).join(', ')}; ${busiest} killed at ` +
      `+${killedAt - phase.start} ms, cluster whole ${((wholeAt - killedAt) / 1000).toFixed(1)} s later, ` +
      `sharing again ${(sharingMs / 1000).toFixed(1)} s after that (bound 20 s); ` +
      `masters in use at the end: ${stores[0].nodes.join(', ')}`,
  );
  await Promise.all(members.map((m) => m.child.stop()));
  await cluster.close();
}

/**
 * A new question through each member in turn: true when the second answer came from the store
 * (the API was asked once). Any answer but a 200 is a failed request of the phase.
 */
function sharing(soak, members) {
  let n = 0;
  return async () => {
    const path = `/v1.0/echo/soak-shared-${n++}`;
    let status = '';
    for (const m of members) {
      const res = await request(`${m.origin}${path}`);
      await res.body.dump();
      soak.check(res.statusCode === 200, `h: a question answered ${res.statusCode}`);
      status = String(res.headers['cache-status'] ?? '');
    }
    return status === 'oauth-sidecar; hit';
  };
}

async function storeOf(member) {
  const res = await request(`${member.admin}/status`);
  return (await res.body.json()).store;
}

/** Poll `condition` every 200 ms until true (then true) or `ms` passed (false). */
async function until(ms, condition) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await condition()) return true;
    } catch {
      // a member or node not answering yet: try again
    }
    if (Date.now() > deadline) return false;
    await sleep(200);
  }
}
