// What a request costs the shared store, counted (docs/capacity.md quotes this): N sidecar
// processes (the built bundle) against a real 3-master Redis Cluster and a standalone redis-server,
// for each feature mix, with per request:
//   - store commands by name (INFO commandstats deltas, summed over the shards),
//   - bytes into and out of the store (INFO stats total_net_input_bytes / total_net_output_bytes),
//   - Redis CPU per shard (INFO cpu used_cpu_sys + used_cpu_user deltas),
//   - the sidecars' own CPU (/proc/<pid>/stat utime + stime).
// Each fleet is first measured idle (what every member costs per second whatever its traffic: the
// cooldown poll, health checks); the per-request figures are net of that background.
//
// The figures that matter are counts (commands per request), which do not depend on the machine's
// load; the CPU figures do and are indicative only. Results: bench/results/capacity/ (ignored).
//
//   npm run bench:capacity            full run (N = 1, 2, 4, 8; cluster and standalone)
//   node bench/capacity.mjs --quick   N = 1, 4 on the cluster, 4 standalone; fewer requests (< 3 min)
//   node bench/capacity.mjs --core    only what one Redis core serves (redis-benchmark), ~20 s
//   options: --dist dist-before (another build, for before/after) --configs token,quota+cache,quota-binding --members 1,2 --topologies cluster,standalone --requests 600 --concurrency 8 --keep
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import {
  benchScript,
  CLK_TCK,
  cpuTicks,
  freePorts,
  importTypeScript,
  makePki,
  ROOT,
  say,
  sidecarEnv,
  startBenchStandin,
  startChild,
  waitForStatus,
} from './lib.mjs';

const { args, work, cleanups, runMain } = benchScript(import.meta.url, 'oauth-sidecar-capacity-', {
  quick: { type: 'boolean', default: false },
  members: { type: 'string' },
  topologies: { type: 'string' },
  requests: { type: 'string' },
  concurrency: { type: 'string', default: '8' },
  'idle-seconds': { type: 'string' },
  core: { type: 'boolean', default: false },
  configs: { type: 'string' },
  /** Another build of the bundle (e.g. a copy of dist/ before a change), for before/after runs. */
  dist: { type: 'string', default: 'dist' },
});
const QUICK = args.quick;
const REQUESTS = Number(args.requests ?? (QUICK ? 300 : 1000));
const CONCURRENCY = Number(args.concurrency);
const IDLE_SECONDS = Number(args['idle-seconds'] ?? (QUICK ? 2 : 5));
/** Fleet sizes per topology. */
const PLAN = (() => {
  const topologies = (args.topologies ?? 'cluster,standalone').split(',');
  const members = args.members?.split(',').map(Number);
  return topologies.map((topology) => ({
    topology,
    sizes: members ?? (QUICK ? (topology === 'cluster' ? [4] : [2]) : [1, 2, 4, 8]),
  }));
})();

/** The three callers of the fair-share mixes (gateway mode: named by a header). */
const CALLERS = ['alpha', 'bravo', 'charlie'];
/**
 * Feature configurations: each is one fleet start. `token`: the store shares the token set only;
 * `quota+cache`: a rate limit shared fairly by 3 callers and the shared cache tier. The limit is
 * far above the load: the per-request cost of admission, not of waiting, is what is counted.
 */
const CONFIGS = {
  token: {},
  'quota+cache': {
    UPSTREAM_RATE_LIMIT: '20000/s',
    QUOTA_CALLER_HEADER: 'x-caller',
    QUOTA_CALLERS: CALLERS.map((c) => `${c}=1`).join(','),
    CACHE_SHARED: 'true',
    CACHE_RULES: '/v1.0/echo/=300',
  },
  /** A limit the load exceeds: members wait for slots and most requests are refused. */
  'quota-binding': {
    UPSTREAM_RATE_LIMIT: '4/s',
    UPSTREAM_QUEUE_MS: '1000',
    QUOTA_CALLER_HEADER: 'x-caller',
    QUOTA_CALLERS: CALLERS.map((c) => `${c}=1`).join(','),
  },
};
/**
 * Feature mixes: the configuration they run on and the path of request k. A cached path is asked
 * `repeat` times in a row by consecutive requests, which go to members in turn (k mod N): repeat 1
 * is a miss each time (≈ 0 % hits), 2 ≈ 50 %, 10 ≈ 90 %; with N > 1 a repeat lands on another
 * member, whose local miss is a store hit.
 */
const MIXES = [
  { name: 'token only', config: 'token', path: () => '/v1.0/contracts' },
  { name: 'rate limit, 3 callers', config: 'quota+cache', path: () => '/v1.0/contracts' },
  { name: 'shared cache ≈0 % hits', config: 'quota+cache', repeat: 1 },
  { name: 'shared cache ≈50 % hits', config: 'quota+cache', repeat: 2 },
  { name: 'shared cache ≈90 % hits', config: 'quota+cache', repeat: 10 },
  {
    name: 'rate limit binding (4/s)',
    config: 'quota-binding',
    path: () => '/v1.0/contracts',
    seconds: QUICK ? 3 : 6,
    // Several waiters on every member: the fleet competes for each slot.
    concurrency: 32,
  },
];

let run = 0;

/** One INFO of every shard: commandstats, stats and cpu in one call. */
async function snapshot(send, ports) {
  const out = new Map();
  for (const port of ports) {
    const text = await send(port, ['INFO', 'commandstats', 'stats', 'cpu']);
    const calls = {};
    const usec = {};
    for (const m of text.matchAll(/^cmdstat_([\w|]+):calls=(\d+),usec=(\d+)/gm)) {
      calls[m[1]] = Number(m[2]);
      usec[m[1]] = Number(m[3]);
    }
    const field = (name) => Number(new RegExp(`^${name}:(\\S+)`, 'm').exec(text)?.[1] ?? NaN);
    out.set(port, {
      calls,
      usec,
      bytesIn: field('total_net_input_bytes'),
      bytesOut: field('total_net_output_bytes'),
      cpu: field('used_cpu_sys') + field('used_cpu_user'),
      infoBytes: Buffer.byteLength(text, 'latin1'),
    });
  }
  return out;
}

/**
 * What the store did between two snapshots, without the snapshots themselves: INFO calls are
 * dropped, the INFO replies' bytes taken off the output and their requests off the input.
 */
function delta(before, after) {
  const byName = {};
  const shards = [];
  let bytesIn = 0;
  let bytesOut = 0;
  for (const [port, a] of after) {
    const b = before.get(port);
    let commands = 0;
    let usec = 0;
    for (const [name, calls] of Object.entries(a.calls)) {
      if (name === 'info') continue;
      const d = calls - (b.calls[name] ?? 0);
      if (d === 0) continue;
      byName[name] = (byName[name] ?? 0) + d;
      if (!ROUND_TRIP.has(name)) continue;
      commands += d;
      // A script's time includes the commands it runs: only what clients sent is summed.
      usec += a.usec[name] - (b.usec[name] ?? 0);
    }
    // The INFO request (~50 bytes) and the earlier snapshot's reply, which Redis counted after `b`.
    const inBytes = a.bytesIn - b.bytesIn - 50;
    const outBytes = a.bytesOut - b.bytesOut - b.infoBytes;
    bytesIn += Math.max(0, inBytes);
    bytesOut += Math.max(0, outBytes);
    shards.push({ port, commands, usec, cpuSeconds: a.cpu - b.cpu });
  }
  return { byName, shards, bytesIn, bytesOut };
}

/**
 * Commands a client sends (one round trip each). Every other name in INFO commandstats is run
 * inside a script (the sidecar sends nothing but scripts and PING): counted apart, as the work a
 * script does, not as store operations.
 */
const ROUND_TRIP = new Set([
  'evalsha',
  'eval',
  'ping',
  'cluster|slots',
  'cluster|shards',
  'cluster',
  'hello',
  'client|setname',
  'client|setinfo',
  'client',
  'select',
  'auth',
  'readonly',
  'command',
  'script|load',
  'script',
]);

const total = (byName) => Object.values(byName).reduce((a, b) => a + b, 0);
const trips = (byName) =>
  Object.entries(byName).reduce((sum, [name, n]) => sum + (ROUND_TRIP.has(name) ? n : 0), 0);

async function startStore(topology, helpers) {
  if (topology === 'cluster') {
    const cluster = await helpers.topologies.startRedisCluster({ masters: 3, replicas: 0 });
    cleanups.push(() => cluster.close());
    return {
      url: cluster.url,
      mode: 'cluster',
      ports: await cluster.masters(),
      close: () => cluster.close(),
    };
  }
  const server = await helpers.redis.startRedisServer();
  cleanups.push(() => server.close());
  return {
    url: server.url,
    mode: 'standalone',
    ports: [server.port],
    close: () => server.close(),
  };
}

async function startFleet(size, config, { standin, pki, store }) {
  const members = [];
  for (let i = 0; i < size; i++) {
    const [proxyPort, adminPort] = await freePorts(2);
    const child = startChild(process.execPath, [resolve(ROOT, args.dist, 'main.js')], {
      env: sidecarEnv({
        upstream: standin.url,
        tokenUrl: `${standin.url}/oauth/token/`,
        caFile: pki.caFile,
        proxyPort,
        adminPort,
        extra: {
          STORE_URL: store.url,
          STORE_MODE: store.mode,
          // A per-run prefix: each run starts from an empty store (its own token set, bucket, cache).
          STORE_KEY_PREFIX: `cap${run}:`,
          PROXY_MAX_IN_FLIGHT: '256',
          ...CONFIGS[config],
        },
      }),
      logFile: join(work, `run${run}-${config}-${i}.log`),
    });
    cleanups.push(() => child.stop());
    members.push({
      child,
      origin: `http://127.0.0.1:${proxyPort}`,
      admin: `http://127.0.0.1:${adminPort}`,
    });
  }
  for (const m of members) {
    await waitForStatus(`${m.admin}/readyz`, { timeoutMs: 60_000, isAlive: () => !m.child.exited });
  }
  return members;
}

/**
 * `REQUESTS` requests of `mix` (or as many as `mix.seconds` allow) over `CONCURRENCY`
 * connections, request k to member k mod N. A 429 counts as refused (expected when the limit binds).
 */
async function load(members, mix, agent) {
  let next = 0;
  const answers = { total: 0, ok: 0, refused: 0, failed: 0, hits: 0, forwarded: 0 };
  const deadline = mix.seconds === undefined ? Infinity : Date.now() + mix.seconds * 1000;
  const tag = `r${run}-${mix.repeat ?? 0}`;
  const worker = async () => {
    for (;;) {
      const k = next++;
      if (mix.seconds === undefined ? k >= REQUESTS : Date.now() >= deadline) return;
      answers.total++;
      const member = members[k % members.length];
      const path = mix.path?.() ?? `/v1.0/echo/${tag}-${Math.floor(k / mix.repeat)}`;
      const res = await request(`${member.origin}${path}`, {
        dispatcher: agent,
        headers: { 'x-caller': CALLERS[k % CALLERS.length] },
      });
      await res.body.dump();
      if (res.statusCode === 200) answers.ok++;
      else if (res.statusCode === 429) answers.refused++;
      else answers.failed++;
      const cacheStatus = String(res.headers['cache-status'] ?? '');
      if (/fwd=/.test(cacheStatus) || cacheStatus === '') answers.forwarded++;
      else answers.hits++;
    }
  };
  await Promise.all(Array.from({ length: mix.concurrency ?? CONCURRENCY }, worker));
  return answers;
}

const fleetTicks = (members) => members.reduce((sum, m) => sum + cpuTicks(m.child.pid), 0);

/** Measure the idle fleet, then each mix of `config`. */
async function measureConfig(store, size, config, context, helpers, rows) {
  run++;
  const members = await startFleet(size, config, { ...context, store });
  const send = (port, argv) => helpers.redis.send(port, argv);
  // Settle: start-up reads and the first token are not the background.
  await sleep(500);
  let before = await snapshot(send, store.ports);
  const idleStart = Date.now();
  await sleep(IDLE_SECONDS * 1000);
  let after = await snapshot(send, store.ports);
  const idleSeconds = (Date.now() - idleStart) / 1000;
  const idle = delta(before, after);
  const idleRate = {};
  for (const [name, n] of Object.entries(idle.byName)) idleRate[name] = n / idleSeconds;
  rows.idle.push({
    topology: store.mode,
    members: size,
    config,
    seconds: idleSeconds,
    /** Round trips per member per second, and the commands the scripts ran. */
    perMemberSecond: trips(idle.byName) / idleSeconds / size,
    scriptCommandsPerMemberSecond: (total(idle.byName) - trips(idle.byName)) / idleSeconds / size,
    usecPerMemberSecond: idle.shards.reduce((a, s) => a + s.usec, 0) / idleSeconds / size,
    byName: Object.fromEntries(
      Object.entries(idleRate).map(([k, v]) => [k, Number((v / size).toFixed(3))]),
    ),
  });
  const agent = new Agent({ connections: 64 });
  for (const mix of MIXES.filter((m) => m.config === config)) {
    const grantsBefore = context.standin.tokenRequests.length;
    const ticksBefore = fleetTicks(members);
    before = await snapshot(send, store.ports);
    const start = Date.now();
    const answers = await load(members, mix, agent);
    after = await snapshot(send, store.ports);
    const seconds = (Date.now() - start) / 1000;
    const ticks = fleetTicks(members) - ticksBefore;
    const n = answers.total;
    const d = delta(before, after);
    // Net of the background the idle fleet sends in as long a window.
    const net = {};
    for (const [name, calls] of Object.entries(d.byName)) {
      const v = calls - (idleRate[name] ?? 0) * seconds;
      if (Math.abs(v) >= 0.5) net[name] = v / n;
    }
    const shardCommands = d.shards.map((s) => s.commands);
    rows.mixes.push({
      topology: store.mode,
      members: size,
      mix: mix.name,
      requests: n,
      seconds,
      answers,
      hitRatio: answers.hits / n,
      grants: context.standin.tokenRequests.length - grantsBefore,
      /** Round trips per request, net of the background. */
      netTripsPerRequest: trips(net),
      /** Commands run inside those scripts per request, net of the background. */
      netScriptCommandsPerRequest: total(net) - trips(net),
      grossTripsPerRequest: trips(d.byName) / n,
      /** Round trips per request that went upstream (admitted), net of the background. */
      netTripsPerAdmitted: (trips(net) * n) / Math.max(1, answers.ok - answers.hits),
      netByName: Object.fromEntries(Object.entries(net).map(([k, v]) => [k, Number(v.toFixed(3))])),
      hottestShardShare: Math.max(...shardCommands) / Math.max(1, trips(d.byName)),
      /** Redis time in the commands clients sent (scripts whole), per request, per shard. */
      redisUsecPerRequest: d.shards.map((s) => s.usec / n),
      bytesInPerRequest: d.bytesIn / n,
      bytesOutPerRequest: d.bytesOut / n,
      redisCpuUsPerRequest: d.shards.map((s) => (s.cpuSeconds * 1e6) / n),
      sidecarCpuUsPerRequest: ((ticks / CLK_TCK) * 1e6) / n,
    });
    await sleep(200);
  }
  await agent.close();
  await Promise.all(members.map((m) => m.child.stop()));
}

/**
 * What one Redis core serves, with redis-benchmark (50 connections, no pipelining, as the fleet
 * sends them) on a fresh standalone server: PING, and EVALSHA of the quota's scripts as the
 * sidecar sends them (their text and arguments taken from the built dist/fleet/quota.js through a recording
 * connection). ops/s of one core: the per-shard capacity docs/capacity.md projects with.
 */
async function coreCapacity(helpers) {
  const quota = await import(join(ROOT, 'dist', 'fleet', 'quota.js'));
  const calls = [];
  const recording = {
    hashTags: false,
    health: () => ({ up: true }),
    runScript: async (script, keys, argv) => {
      calls.push({ script, keys, argv });
      return script.lua.includes("'until', 'status'") && keys.length === 1
        ? [0, 0]
        : Array(6).fill(0);
    },
  };
  const q = quota.createStoreQuota({
    connection: recording,
    keyPrefix: 'core:',
    upstream: 'https://api.example',
    rateLimit: { count: 1_000_000_000, periodMs: 1000 },
    maxCooldownMs: 60_000,
  });
  await q.take([{ caller: 'alpha', weight: 1, priority: 'interactive', want: 1 }]);
  await q.readCooldown();
  const [take, read] = calls;
  const server = await helpers.redis.startRedisServer();
  cleanups.push(() => server.close());
  const n = QUICK ? 20_000 : 100_000;
  const bench = (name, argv) => {
    const out = spawnSync(
      'redis-benchmark',
      ['-p', String(server.port), '-c', '50', '-n', String(n), '-q', ...argv],
      { encoding: 'utf8', timeout: 120_000 },
    );
    const rps = Number(/([\d.]+) requests per second/.exec(out.stdout ?? '')?.[1] ?? NaN);
    return { name, opsPerSecond: rps };
  };
  /** Redis's own time per call of `command` so far (INFO commandstats usec_per_call). */
  const usecPerCall = async (command) => {
    const info = await helpers.redis.send(server.port, ['INFO', 'commandstats']);
    return Number(new RegExp(`^cmdstat_${command}:.*usec_per_call=([\\d.]+)`, 'm').exec(info)?.[1]);
  };
  const results = [{ ...bench('PING', ['ping']), usecPerCall: await usecPerCall('ping') }];
  for (const [name, call] of [
    ['quota take (EVALSHA)', take],
    ['cooldown read (EVALSHA)', read],
  ]) {
    await helpers.redis.send(server.port, ['SCRIPT', 'LOAD', call.script.lua]);
    await helpers.redis.send(server.port, ['CONFIG', 'RESETSTAT']);
    const argv = ['evalsha', call.script.sha1, String(call.keys.length), ...call.keys];
    results.push({
      ...bench(name, [...argv, ...call.argv]),
      usecPerCall: await usecPerCall('evalsha'),
    });
  }
  await server.close();
  return results;
}

async function main() {
  const t0 = Date.now();
  const helpers = {
    redis: await importTypeScript('test/helpers/redis-server.ts', work),
    topologies: await importTypeScript('test/helpers/redis-topologies.ts', work),
  };
  const pki = makePki(work);
  const standin = await startBenchStandin(pki, cleanups);
  const rows = { core: await coreCapacity(helpers), idle: [], mixes: [] };
  if (args.core) {
    report(rows, (Date.now() - t0) / 1000);
    return 0;
  }
  for (const { topology, sizes } of PLAN) {
    const store = await startStore(topology, helpers);
    for (const size of sizes) {
      for (const config of args.configs?.split(',') ?? Object.keys(CONFIGS)) {
        await measureConfig(store, size, config, { standin, pki }, helpers, rows);
      }
    }
    await store.close();
  }
  report(rows, (Date.now() - t0) / 1000);
  return rows.mixes.some((r) => r.answers.failed > 0) ? 1 : 0;
}

function report(rows, seconds) {
  const f = (n, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
  say();
  say('Store operations (round trips) per request, net of the idle background, by feature mix');
  say();
  say(
    '| store | N | mix | hits | refused | ops/req | ops/sent upstream | by name | in scripts/req | hottest shard | B in/req | B out/req | Redis cmd µs/req (per shard) | Redis CPU µs/req (per shard) | sidecar CPU µs/req | failed |',
  );
  say('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows.mixes) {
    const names = Object.entries(r.netByName)
      .filter(([k, v]) => ROUND_TRIP.has(k) && Math.abs(v) >= 0.005)
      .map(([k, v]) => `${k} ${f(v)}`)
      .join(', ');
    say(
      `| ${r.topology} | ${r.members} | ${r.mix} | ${f(r.hitRatio * 100, 0)} % | ${f((r.answers.refused / r.requests) * 100, 0)} % | ${f(r.netTripsPerRequest)} | ${f(r.netTripsPerAdmitted)} | ${names} | ${f(r.netScriptCommandsPerRequest, 1)} | ${f(r.hottestShardShare * 100, 0)} % | ${f(r.bytesInPerRequest, 0)} | ${f(r.bytesOutPerRequest, 0)} | ${r.redisUsecPerRequest.map((c) => f(c, 1)).join(' / ')} | ${r.redisCpuUsPerRequest.map((c) => f(c, 0)).join(' / ')} | ${f(r.sidecarCpuUsPerRequest, 0)} | ${r.answers.failed} |`,
    );
  }
  say();
  say('Background per member per second (idle fleet)');
  say();
  say(
    '| store | N | config | ops/member/s | by name | in scripts/member/s | Redis cmd µs/member/s |',
  );
  say('|---|---|---|---|---|---|---|');
  for (const r of rows.idle) {
    const names = Object.entries(r.byName)
      .filter(([k]) => ROUND_TRIP.has(k))
      .map(([k, v]) => `${k} ${f(v)}`)
      .join(', ');
    say(
      `| ${r.topology} | ${r.members} | ${r.config} | ${f(r.perMemberSecond)} | ${names} | ${f(r.scriptCommandsPerMemberSecond, 1)} | ${f(r.usecPerMemberSecond, 0)} |`,
    );
  }
  say();
  say('One Redis core (redis-benchmark -c 50, no pipelining, standalone)');
  say();
  say('| command | ops/s | Redis µs/call |');
  say('|---|---|---|');
  for (const r of rows.core)
    say(`| ${r.name} | ${f(r.opsPerSecond, 0)} | ${f(r.usecPerCall, 1)} |`);
  say();
  say(
    `${REQUESTS} requests per mix over ${CONCURRENCY} connections (the binding mix: as many as ` +
      `its seconds allow over 32); idle windows ${IDLE_SECONDS} s; ` +
      `node ${process.version}; ${seconds.toFixed(0)} s in all`,
  );
  const dir = join(ROOT, 'bench', 'results', 'capacity');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    JSON.stringify(
      { quick: QUICK, requests: REQUESTS, concurrency: CONCURRENCY, ...rows },
      null,
      2,
    ),
  );
  say(`results: ${file}`);
}

await runMain('capacity bench', main);
