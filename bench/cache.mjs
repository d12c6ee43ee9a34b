// The response cache benchmark (issue 12): a 2 KB answer served from the sidecar's cache, the
// same request forwarded (the miss path: `Cache-Control: no-store` bypasses the cache, so every
// request goes upstream), a local miss answered from the shared tier in a real redis-server (a
// second sidecar with `CACHE_SHARED` and a one-entry local tier, cycling 1,000 keys the store
// holds), and nginx serving the same body from disk. Alternating order over several rounds;
// medians of per-round ratios. Checks that cache hits and store hits sent nothing upstream.
//
//   npm run build && node bench/cache.mjs [--rounds 3] [--duration 5] [--connections 50]
//     [--node /path/to/node] [--no-pin] [--keep] [--targets hit,miss,shared,nginx]
//     [--sidecar-flags="--cpu-prof --cpu-prof-dir=DIR"] [--no-shipped-runtime] [--help]
//
// The sidecars run on the shipped runtime (the Dockerfile's NODE_OPTIONS, GLIBC_TUNABLES and
// ENTRYPOINT flags) unless --no-shipped-runtime; --sidecar-flags add node flags (a CPU profile:
// summarise it with bench/profile-summary.mjs).
//
// Pinning as in bench/run.mjs (taskset, 2+ cores): the servers compared (sidecars, nginx serving
// the file) on CPU 1; wrk, the upstream nginx, redis-server and this process (token endpoint) on
// CPU 0.
//
// Needs nginx, wrk and redis-server. Writes its results (cache-latest, JSON and Markdown) to the
// git-ignored bench/results/; exits 1 when a hit reached the upstream.
import { Buffer } from 'node:buffer';
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { promisify } from 'node:util';
import { request } from 'undici';
import { roundOrder } from './order.mjs';
import { dockerEntrypointFlags, shippedEnv } from './shipped-runtime.mjs';
import {
  benchScript,
  caAgent,
  CLK_TCK,
  contractsJson,
  cpuTicks,
  fmt,
  freePort,
  freePorts,
  makePki,
  median,
  metricSum,
  pinning,
  ROOT,
  say,
  scrape,
  sidecarEnv,
  startBenchStandin,
  startChild,
  startRedisServer,
  waitForStatus,
} from './lib.mjs';

const run = promisify(execFile);
const { args, work, cleanups, runMain } = benchScript(
  import.meta.url,
  'oauth-sidecar-bench-cache-',
  {
    rounds: { type: 'string', default: process.env.BENCH_ROUNDS ?? '3' },
    duration: { type: 'string', default: process.env.BENCH_DURATION ?? '5' },
    connections: { type: 'string', default: '50' },
    node: { type: 'string', default: process.env.BENCH_NODE ?? process.execPath },
    'no-pin': { type: 'boolean', default: false },
    targets: { type: 'string', default: 'hit,miss,shared,nginx' },
    'sidecar-flags': { type: 'string', default: '' },
    'no-shipped-runtime': { type: 'boolean', default: false },
  },
);
const WANTED = new Set(args.targets.split(',').filter(Boolean));
const SHIPPED = !args['no-shipped-runtime'];
/** The image's runtime (Dockerfile), and any flags asked for. */
const SIDECAR_FLAGS = [
  ...(SHIPPED ? dockerEntrypointFlags() : []),
  ...args['sidecar-flags'].split(/\s+/).filter(Boolean),
];
const SHIPPED_ENV = SHIPPED ? shippedEnv() : {};
const { pinned: PIN, onCpu, pinSelf } = pinning(args['no-pin']);
const ROUNDS = Number(args.rounds);
const DURATION = Number(args.duration);
const CONNECTIONS = Number(args.connections);
const PATH = '/v1.0/contracts/';
/** Distinct keys the shared-tier row cycles through (all in the store, one at a time locally). */
const SHARED_KEYS = 1000;

function startNginx(name, template, values, cpu) {
  for (const sub of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
    mkdirSync(join(work, `${name}-tmp`, sub), { recursive: true });
  }
  let text = readFileSync(join(ROOT, 'bench', 'nginx', template), 'utf8');
  for (const [key, value] of Object.entries({ DIR: work, ...values })) {
    text = text.replaceAll(`{{${key}}}`, value);
  }
  const conf = join(work, `${name}.conf`);
  writeFileSync(conf, text);
  const [command, argv] = onCpu(cpu, 'nginx', ['-c', conf, '-e', join(work, `${name}-error.log`)]);
  const proc = startChild(command, argv, { logFile: join(work, `${name}.log`) });
  cleanups.push(() => proc.stop('SIGQUIT'));
  return proc;
}

async function wrk(url, headers = [], script = undefined) {
  const argv = ['-t1', `-c${CONNECTIONS}`, `-d${DURATION}s`, '--latency', '--timeout', '10s'];
  for (const h of headers) argv.push('-H', h);
  if (script !== undefined) argv.push('-s', script);
  const [command, full] = onCpu(0, 'wrk', [...argv, url]);
  const { stdout } = await run(command, full, { timeout: (DURATION + 30) * 1000 });
  const unit = (value, u) => Number(value) * { us: 0.001, ms: 1, s: 1000, m: 60000 }[u];
  const pct = (p) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(stdout);
    return m ? unit(m[1], m[2]) : NaN;
  };
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? NaN),
    p50: pct(50),
    p99: pct(99),
    requests: Number(/(\d+) requests in/.exec(stdout)?.[1] ?? NaN),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0),
  };
}

async function main() {
  pinSelf();
  const pki = makePki(work);
  mkdirSync(join(work, 'www'));
  writeFileSync(join(work, 'www', 'contracts.json'), contractsJson());
  writeFileSync(join(work, 'www', 'big.bin'), Buffer.alloc(16));
  const agent = caAgent(pki.caCert);

  const upstreamPort = await freePort();
  const upstream = `https://127.0.0.1:${upstreamPort}`;
  startNginx(
    'upstream',
    'upstream.conf',
    { PORT: upstreamPort, CERT: pki.certFile, KEY: pki.keyFile },
    0,
  );
  await waitForStatus(`${upstream}${PATH}`, { dispatcher: agent });
  const staticPort = await freePort();
  startNginx('static', 'static.conf', { PORT: staticPort }, 1);
  const nginxUrl = `http://127.0.0.1:${staticPort}${PATH}`;
  await waitForStatus(nginxUrl);

  const standin = await startBenchStandin(pki, cleanups);
  const redis = await startRedisServer(cleanups, (command, argv) => onCpu(0, command, argv));
  const startSidecar = async (name, extra) => {
    const [port, adminPort] = await freePorts(2);
    const [sidecarCommand, sidecarArgv] = onCpu(1, args.node, [
      ...SIDECAR_FLAGS,
      join(ROOT, 'dist', 'main.js'),
    ]);
    const proc = startChild(sidecarCommand, sidecarArgv, {
      env: sidecarEnv({
        upstream,
        tokenUrl: `${standin.url}/oauth/token/`,
        caFile: pki.caFile,
        proxyPort: port,
        adminPort,
        extra: { ...SHIPPED_ENV, CACHE_RULES: `${PATH}=3600`, ...extra },
      }),
      logFile: join(work, `${name}.log`),
    });
    cleanups.push(() => proc.stop());
    const admin = `http://127.0.0.1:${adminPort}`;
    await waitForStatus(`${admin}/readyz`, { isAlive: () => !proc.exited });
    return { admin, url: `http://127.0.0.1:${port}${PATH}`, pid: proc.pid };
  };
  const local = await startSidecar('sidecar', {});
  const { admin, url: sidecarUrl } = local;
  const shared = await startSidecar('sidecar-shared', {
    STORE_URL: redis.url,
    CACHE_SHARED: 'true',
    CACHE_MAX_ENTRIES: '1',
  });
  // Every key once through the shared sidecar: the store holds them all, its local tier one.
  for (let k = 1; k <= SHARED_KEYS; k++) await (await request(`${shared.url}?k=${k}`)).body.text();
  const cycling = join(work, 'cycle-keys.lua');
  writeFileSync(
    cycling,
    `local i = 0\nrequest = function()\n  i = i % ${SHARED_KEYS} + 1\n` +
      `  return wrk.format(nil, "${PATH}?k=" .. i)\nend\n`,
  );

  // Same body everywhere; the second sidecar answer must be a hit.
  const bodies = [];
  for (const url of [sidecarUrl, sidecarUrl, nginxUrl]) {
    const res = await request(url);
    bodies.push({ text: await res.body.text(), status: res.headers['cache-status'] });
  }
  const fromStore = await request(`${shared.url}?k=1`);
  bodies.push({ text: await fromStore.body.text(), status: fromStore.headers['cache-status'] });
  if (
    bodies[1].status !== 'oauth-sidecar; hit' ||
    bodies[3].status !== 'oauth-sidecar; hit' ||
    new Set(bodies.map((b) => b.text)).size !== 1
  ) {
    throw new Error(`warm-up: ${JSON.stringify(bodies.map((b) => b.status))}, bodies differ?`);
  }

  const allTargets = [
    {
      name: 'hit',
      label: 'oauth-sidecar, cache hit',
      url: sidecarUrl,
      headers: [],
      pid: local.pid,
    },
    {
      name: 'miss',
      label: 'oauth-sidecar, forwarded (`Cache-Control: no-store`: the miss path)',
      url: sidecarUrl,
      headers: ['Cache-Control: no-store'],
      pid: local.pid,
    },
    {
      name: 'shared',
      label: `oauth-sidecar, local miss answered from the store (shared tier, ${SHARED_KEYS} keys)`,
      url: shared.url,
      headers: [],
      script: cycling,
      admin: shared.admin,
      pid: shared.pid,
    },
    { name: 'nginx', label: 'nginx serving the same file (HTTP)', url: nginxUrl, headers: [] },
  ];
  const targets = allTargets.filter((t) => WANTED.has(t.name));
  for (const t of targets) await wrk(t.url, t.headers, t.script); // warm-up (JIT, pools)

  const upstreamCount = async (adminUrl = admin) =>
    metricSum(await scrape(adminUrl), 'oauth_sidecar_upstream_requests_total');
  const storeHits = async () =>
    metricSum(await scrape(shared.admin), 'oauth_sidecar_cache_shared_requests_total', {
      result: 'hit',
    });
  let upstreamDuringStoreHits = 0;
  let storeHitsMeasured = 0;
  let sharedRequests = 0;
  const rounds = [];
  let upstreamDuringHits = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const order = roundOrder(targets, r);
    const round = {};
    for (const t of order) {
      const before = t.name === 'hit' ? await upstreamCount() : 0;
      const sharedBefore =
        t.name === 'shared' ? [await upstreamCount(t.admin), await storeHits()] : [];
      const ticks = t.pid === undefined ? 0 : cpuTicks(t.pid);
      round[t.name] = await wrk(t.url, t.headers, t.script);
      if (t.pid !== undefined) {
        const cpuMs = ((cpuTicks(t.pid) - ticks) * 1000) / CLK_TCK;
        round[t.name].cpuUsPerRequest = (cpuMs * 1000) / round[t.name].requests;
      }
      if (t.name === 'hit') upstreamDuringHits += (await upstreamCount()) - before;
      if (t.name === 'shared') {
        upstreamDuringStoreHits += (await upstreamCount(t.admin)) - sharedBefore[0];
        storeHitsMeasured += (await storeHits()) - sharedBefore[1];
        sharedRequests += round[t.name].requests;
      }
    }
    rounds.push(round);
    say(
      `round ${r + 1}/${ROUNDS}: ` +
        order.map((t) => `${t.name} ${fmt.int(round[t.name].rps)} req/s`).join(', '),
    );
  }

  const pick = (name, key) => median(rounds.map((r) => r[name][key]));
  const ratio = (a, b, key = 'rps') =>
    median(rounds.map((r) => (r[a] && r[b] ? r[a][key] / r[b][key] : NaN)));
  const summary = Object.fromEntries(
    targets.map((t) => [
      t.name,
      {
        label: t.label,
        rps: pick(t.name, 'rps'),
        p50: pick(t.name, 'p50'),
        p99: pick(t.name, 'p99'),
        cpuUs: t.pid === undefined ? undefined : pick(t.name, 'cpuUsPerRequest'),
        non2xx: rounds.reduce((s, r) => s + r[t.name].non2xx, 0),
      },
    ]),
  );
  const ratios = {
    hitOverMiss: ratio('hit', 'miss'),
    hitOverNginx: ratio('hit', 'nginx'),
    sharedOverHit: ratio('shared', 'hit'),
    sharedOverMiss: ratio('shared', 'miss'),
    sharedOverMissCpu: ratio('shared', 'miss', 'cpuUsPerRequest'),
  };
  const meta = {
    date: new Date().toISOString(),
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    proxyNode: execFileSync(args.node, ['--version'], { encoding: 'utf8' }).trim(),
    loadavgAtEnd: loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
    wrk: `wrk -t1 -c${CONNECTIONS} -d${DURATION}s --latency`,
    rounds: ROUNDS,
    command: `node bench/cache.mjs ${process.argv.slice(2).join(' ')}`.trim(),
    runtime: SHIPPED
      ? 'shipped (Dockerfile NODE_OPTIONS, GLIBC_TUNABLES, ENTRYPOINT flags)'
      : 'plain node',
    pinned: PIN
      ? 'taskset: sidecars and nginx (static) on CPU 1; wrk, upstream nginx, redis-server, token endpoint on CPU 0'
      : 'not pinned',
  };
  const lines = [
    '# oauth-sidecar response cache benchmark',
    '',
    `${meta.date} · ${meta.cpu} · ${meta.cores} cores · sidecar on ${meta.proxyNode} · load average at end ${meta.loadavgAtEnd}`,
    '',
    `Load: \`${meta.wrk}\` for one 2 KB answer (\`${PATH}\`, \`CACHE_RULES=${PATH}=3600\`); ` +
      `${meta.rounds} rounds in alternating order, medians over rounds. Runtime: ${meta.runtime}. ` +
      `Pinning: ${meta.pinned}.`,
    '',
    '| target | 2 KB req/s | p50 | p99 | CPU µs / request | non-2xx |',
    '|---|---:|---:|---:|---:|---:|',
    ...targets.map((t) => {
      const s = summary[t.name];
      const cpu = s.cpuUs === undefined ? '–' : fmt.int(s.cpuUs);
      return `| ${s.label} | ${fmt.int(s.rps)} | ${fmt.ms(s.p50)} | ${fmt.ms(s.p99)} | ${cpu} | ${s.non2xx} |`;
    }),
    '',
    '| ratio (median of per-round ratios) | value |',
    '|---|---:|',
    `| cache hit / miss path (req/s) | ${fmt.x(ratios.hitOverMiss)} |`,
    `| cache hit / nginx static (req/s) | ${fmt.x(ratios.hitOverNginx)} |`,
    `| shared tier (store hit) / local hit (req/s) | ${fmt.x(ratios.sharedOverHit)} |`,
    `| shared tier (store hit) / miss path (req/s) | ${fmt.x(ratios.sharedOverMiss)} |`,
    `| shared tier (store hit) / miss path (CPU per request) | ${fmt.x(ratios.sharedOverMissCpu)} |`,
    '',
    `Upstream requests while hits were measured: ${upstreamDuringHits} (must be 0); while the ` +
      `shared tier was measured: ${upstreamDuringStoreHits} (must be 0), with ${storeHitsMeasured} ` +
      `store hits for ${sharedRequests} requests (the rest: local hits on the one local entry).`,
    '',
    `Reproduce: \`npm run build && ${meta.command}\``,
    '',
  ];
  const md = lines.join('\n');
  const dir = join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const results = {
    meta,
    summary,
    ratios,
    upstreamDuringHits,
    upstreamDuringStoreHits,
    storeHitsMeasured,
    rounds,
  };
  writeFileSync(join(dir, 'cache-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(dir, 'cache-latest.md'), md);
  say();
  say(md);
  const failed =
    upstreamDuringHits !== 0 ||
    upstreamDuringStoreHits !== 0 ||
    Object.values(summary).some((s) => s.non2xx !== 0);
  return failed ? 1 : 0;
}

await runMain('bench-cache', main);
