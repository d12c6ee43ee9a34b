/**
 * The store on a real Redis Cluster and behind real Sentinels (docs/token-store.md "Redis Cluster
 * and Sentinel"): sidecar processes (the bundle) with `STORE_MODE=cluster` / `sentinel`, a master
 * or the primary killed with SIGKILL under steady load. Each fail-over: no failed request, and
 * the fleet shares again within 20 s of the store being whole.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  sentinelEnv,
  startClusterAndSentinels,
  type ClusterAndSentinels,
} from './helpers/redis-topologies.js';
import { useStandinFleet } from './helpers/standin-fleet.js';
import {
  readyInTests,
  storeOnceUp,
  storeStatus,
  waitFor,
  type SidecarProcess,
} from './helpers/sidecar-process.js';
import { realClock } from './helpers/wait.js';

const load = realClock('steady load on the sidecar processes at one request per 20 ms');

const fleet = useStandinFleet();
let started: ClusterAndSentinels | undefined;

// One cluster (3 masters + 3 replicas) and one Sentinel setup for the file, started side by side.
// The cluster's first test leaves it whole; its second kills a master; the Sentinel test kills the
// primary, and is the only one to use it.
beforeAll(async () => {
  started = await startClusterAndSentinels({ cluster: { masters: 3, replicas: 1 } });
}, 120_000);

afterAll(async () => {
  await started?.close();
});

const topologies = (): ClusterAndSentinels => readyInTests(started, 'the topologies');

/** The three shared things: the token set, the shared cache tier and the fleet quota. */
const SHARED = {
  CACHE_SHARED: 'true',
  CACHE_RULES: '/v1.0/echo/=60',
  UPSTREAM_RATE_LIMIT: '1000/s',
  LOG_LEVEL: 'info',
  // `up` in a cluster is the health check of every master: 200 ms apart, a lost master shows at once.
  STORE_HEALTH_CHECK_INTERVAL_MS: String(200),
};
/** Starting a fleet, a fail-over and the wait for sharing: well within this. */
const TEST_TIMEOUT_MS = 120_000;

const grants = (): number =>
  fleet.standin.tokenRequests.filter((r) => r.outcome === 'issued').length;

/** API requests the stand-in received for `path`. */
const asked = (path: string): number =>
  fleet.standin.apiRequests.filter((r) => r.url === path).length;

async function get(sidecar: SidecarProcess, path: string) {
  const res = await request(`${sidecar.proxyUrl}${path}`);
  await res.body.text();
  return { status: res.statusCode, cacheStatus: String(res.headers['cache-status'] ?? '') };
}

let question = 0;

/** A new question through `members` in turn: true when the API was asked it once (shared). */
async function sharedOnce(members: SidecarProcess[]): Promise<boolean> {
  const path = `/v1.0/echo/shared-${process.pid}-${question++}`;
  for (const member of members) {
    if ((await get(member, path)).status !== 200) return false;
  }
  return asked(path) === 1;
}

/**
 * Steady load through `members` until `stop()`: each loop asks a new question (a store read with
 * its fill lease, an API request, a store write) and the token path; every status counted.
 */
function steadyLoad(members: SidecarProcess[]) {
  const statuses = new Map<string, number>();
  let running = true;
  let answered = 0;
  let n = 0;
  const loops = members.map(async (member) => {
    while (running) {
      for (const path of [`/v1.0/echo/load-${process.pid}-${n++}`, '/v1.0/contracts/']) {
        let key: string;
        try {
          key = String((await get(member, path)).status);
        } catch (error) {
          key = error instanceof Error ? error.message : String(error);
        }
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
        answered += 1;
      }
      await load.sleep(20);
    }
  });
  return {
    /** Requests answered so far (any status). */
    answered: () => answered,
    async stop() {
      running = false;
      await Promise.all(loops);
      return Object.fromEntries(statuses);
    },
  };
}

const sharingBound = realClock('a fleet shares again within 20 s of a fail-over');

/** Seconds from now until a new question through `members` costs the API one request. */
async function secondsUntilSharing(members: SidecarProcess[]): Promise<number> {
  const watch = sharingBound.stopwatch();
  await waitFor(() => sharedOnce(members), 20_000, 'the fleet to share again');
  return watch.ms() / 1000;
}

describe('STORE_MODE=cluster on a real Redis Cluster', () => {
  /** A fleet of three on the cluster, for both tests; the second kills a master under it. */
  let members: SidecarProcess[] = [];
  /** Grants the token endpoint made while the three started. */
  let grantsAtStart = 0;

  beforeAll(async () => {
    const { cluster } = topologies();
    const env = { STORE_MODE: 'cluster', STORE_URL: cluster.url, ...SHARED };
    const before = grants();
    members = await Promise.all([
      fleet.startForFile(env),
      fleet.startForFile(env),
      fleet.startForFile(env),
    ]);
    grantsAtStart = grants() - before;
  }, 60_000);

  afterAll(async () => {
    await Promise.all(members.map((member) => member.stop()));
  });

  it(
    '3 masters: one grant for a fleet of 3, entries spread over the masters, one API request per question',
    async () => {
      const { cluster } = topologies();
      expect(grantsAtStart).toBe(1);
      for (let i = 0; i < 12; i++) expect(await sharedOnce(members)).toBe(true);
      const keys = await cluster.keysByMaster();
      expect([...keys.values()].filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
      const status = await storeOnceUp(members[0]!);
      expect(status).toMatchObject({ mode: 'cluster', up: true });
      expect([...(status.nodes ?? [])].sort()).toEqual(
        (await cluster.masters()).map((p) => `127.0.0.1:${p}`).sort(),
      );
    },
    TEST_TIMEOUT_MS,
  );

  it(
    '3 masters + 3 replicas: the busiest master killed under load costs no request; sharing again within 20 s',
    async () => {
      const { cluster } = topologies();
      // Two of the three under load; the third only keeps its connection.
      const [one, two] = members as [SidecarProcess, SidecarProcess];
      // Sharing before the kill within 20 s, as in the Sentinel test below.
      await secondsUntilSharing([one, two]);
      const load = steadyLoad([one, two]);
      await waitFor(() => Promise.resolve(load.answered() >= 20), 20_000, 'the load to run');
      const byMaster = [...(await cluster.keysByMaster()).entries()].sort((a, b) => b[1] - a[1]);
      const busiest = byMaster[0]![0];
      await cluster.kill(busiest);
      await waitFor(
        async () => !(await storeStatus(one)).up,
        5_000,
        '/status to show the store down',
      );
      await cluster.waitHealthy();
      const seconds = await secondsUntilSharing([one, two]);
      const statuses = await load.stop();
      console.log(
        `cluster fail-over: sharing again ${seconds.toFixed(1)} s after the cluster was whole; ${JSON.stringify(statuses)}`,
      );
      expect(Object.keys(statuses)).toEqual(['200']);
      expect(seconds).toBeLessThan(20);
      expect((await storeOnceUp(two)).nodes).not.toContain(`127.0.0.1:${busiest}`);
    },
    TEST_TIMEOUT_MS,
  );
});

describe('STORE_MODE=sentinel behind real Sentinels', () => {
  it(
    'primary + replica + 3 sentinels: the primary killed under load costs no request; sharing again within 20 s',
    async () => {
      const { sentinels } = topologies();
      const env = { ...sentinelEnv(sentinels), ...SHARED };
      const before = grants();
      const members = await Promise.all([fleet.start(env), fleet.start(env)]);
      expect(grants() - before).toBe(1);
      const primary = await sentinels.primary();
      expect(await storeOnceUp(members[0])).toMatchObject({
        mode: 'sentinel',
        nodes: [`127.0.0.1:${primary}`],
        up: true,
      });
      // Sharing before the kill, as after it: within 20 s, not at the first question. On a machine
      // running the whole suite one store call can pass the shipped 500 ms bound, and the cache
      // takes that as a miss by design (docs/response-cache.md "Shared tier").
      await secondsUntilSharing(members);
      const load = steadyLoad(members);
      await waitFor(() => Promise.resolve(load.answered() >= 20), 20_000, 'the load to run');
      await sentinels.kill(primary);
      await waitFor(async () => (await sentinels.primary()) !== primary, 20_000, 'a promotion');
      const seconds = await secondsUntilSharing(members);
      const statuses = await load.stop();
      console.log(
        `sentinel fail-over: sharing again ${seconds.toFixed(1)} s after the promotion; ${JSON.stringify(statuses)}`,
      );
      expect(Object.keys(statuses)).toEqual(['200']);
      expect(seconds).toBeLessThan(20);
      const promoted = await sentinels.primary();
      await waitFor(
        async () =>
          (await storeStatus(members[0])).nodes?.includes(`127.0.0.1:${promoted}`) === true,
        5_000,
        '/status to name the promoted primary',
      );
    },
    TEST_TIMEOUT_MS,
  );
});
