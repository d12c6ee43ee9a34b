// How fast a stale-while-revalidate answer is, against a fresh local hit (docs/benchmarks.md
// "Shared cache tier"): one sidecar (the bundle) in front of the HTTPS stand-in, a cache rule of
// 3 s and a 60 s stale-while-revalidate window on the stand-in's slow route (10 s), so the one
// refresh is still on its way while the stale answers are timed. Sequential requests, one at a
// time: the latency of one answer, not throughput.
//
//   npm run build && node bench/stale-latency.mjs [--requests 500] [--node /path/to/node]
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import {
  benchScript,
  fmt,
  freePort,
  percentile,
  ROOT,
  say,
  sidecarEnv,
  startChild,
  waitForStatus,
} from './lib.mjs';

const { args, work, cleanups, runMain } = benchScript(
  import.meta.url,
  'oauth-sidecar-bench-stale-',
  {
    requests: { type: 'string', default: '500' },
    node: { type: 'string', default: process.env.BENCH_NODE ?? process.execPath },
  },
);
const REQUESTS = Number(args.requests);
const PATH = '/v1.0/slow/10000?stale-latency=1';

/** `REQUESTS` sequential GETs: their latencies (ms, sorted) and the Cache-Status they carried. */
async function timed(url) {
  const ms = [];
  const statuses = new Set();
  for (let i = 0; i < REQUESTS; i++) {
    const started = performance.now();
    const res = await request(url);
    await res.body.text();
    ms.push(performance.now() - started);
    statuses.add(String(res.headers['cache-status']).replace(/ttl=-\d+/, 'ttl=-N'));
  }
  return { ms: ms.sort((a, b) => a - b), statuses: [...statuses] };
}

async function main() {
  const { startStandin } = await import(join(ROOT, 'dist', 'standin', 'index.js'));
  const standin = await startStandin({ clientId: 'bench-client', clientSecret: 'bench-secret' });
  cleanups.push(() => standin.close());
  const caFile = join(work, 'ca.pem');
  writeFileSync(caFile, standin.caCert);
  const [port, adminPort] = [await freePort(), await freePort()];
  const proc = startChild(args.node, [join(ROOT, 'dist', 'main.js')], {
    env: sidecarEnv({
      upstream: standin.url,
      tokenUrl: `${standin.url}/oauth/token/`,
      caFile,
      proxyPort: port,
      adminPort,
      extra: {
        LOG_LEVEL: 'info',
        CACHE_RULES: '/v1.0/slow/=3',
        CACHE_STALE_WHILE_REVALIDATE_SECONDS: '60',
      },
    }),
    logFile: join(work, 'sidecar.log'),
  });
  cleanups.push(() => proc.stop());
  await waitForStatus(`http://127.0.0.1:${adminPort}/readyz`, { isAlive: () => !proc.exited });
  const url = `http://127.0.0.1:${port}${PATH}`;
  await (await request(url)).body.text(); // the fill: 10 s upstream, then 3 s of freshness
  const filled = Date.now();
  const hits = await timed(url);
  if (hits.statuses.some((s) => !s.endsWith('; hit'))) {
    throw new Error(`expected fresh hits, got ${hits.statuses.join(' | ')}`);
  }
  await sleep(Math.max(0, filled + 3_100 - Date.now())); // its freshness is over
  const stale = await timed(url);
  if (stale.statuses.some((s) => !s.endsWith('detail=stale-while-revalidate'))) {
    throw new Error(`expected stale answers, got ${stale.statuses.join(' | ')}`);
  }
  // The stand-in records a request when it answers: wait for the refresh's answer (10 s).
  const answered = () => standin.apiRequests.filter((r) => r.url === PATH).length;
  for (let waited = 0; answered() < 2 && waited < 15_000; waited += 100) await sleep(100);
  const refreshes = answered() - 1;
  const node = execFileSync(args.node, ['--version'], { encoding: 'utf8' }).trim();
  const row = (name, r) =>
    `| ${name} | ${fmt.ms(percentile(r.ms, 50))} | ${fmt.ms(percentile(r.ms, 99))} |`;
  say(`${REQUESTS} sequential requests each, sidecar on ${node}, ${new Date().toISOString()}`);
  say('| answer | p50 | p99 |');
  say('|---|---:|---:|');
  say(row('fresh local hit', hits));
  say(row('stale-while-revalidate (its refresh on the way upstream)', stale));
  say(`refreshes sent upstream while the stale answers were timed: ${refreshes} (must be 1)`);
  return refreshes === 1 ? 0 : 1;
}

await runMain('bench-stale-latency', main);
