// What the response cache really costs a sidecar process, against what it counts:
// many small distinct answers (about 250 bytes of JSON each) into a cache of CACHE_MAX_BYTES,
// and the same flood through a sidecar with no cache rule, for the process's own growth under
// the flood. Each sidecar runs the shipped runtime (the Dockerfile's NODE_OPTIONS, GLIBC_TUNABLES
// and ENTRYPOINT flags) plus --expose-gc and bench/gc-on-signal.mjs, so SIGUSR2 makes it collect
// its garbage and write its memory: heap used + external after a full GC, and RSS.
//
//   npm run build && node bench/cache-memory.mjs [--requests 20000] [--max-bytes 4194304]
//     [--rounds 2] [--idle-ms 1000] [--node-flags="--optimize-for-size"] [--keep]
//
// Prints, per sidecar: RSS and heap + external growth over the warmed-up baseline, the cache's
// own count (/status cache.bytes, cache.entries); and the real cost of one held entry: (growth
// with the cache - growth without) / entries, against what the cache charges per entry. Exits 1
// when an entry holds more than 10 % over its charge (VARIANT_OVERHEAD_BYTES in
// src/proxy/cache/entries.ts is then short).
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { join } from 'node:path';
import process from 'node:process';
import { promisify } from 'node:util';
import { Pool, request } from 'undici';
import { dockerEntrypointFlags, shippedEnv } from './shipped-runtime.mjs';
import {
  benchScript,
  freePorts,
  makePki,
  procStatusBytes,
  ROOT,
  say,
  sidecarEnv,
  startBenchStandin,
  startChild,
  waitForStatus,
} from './lib.mjs';

const sleep = promisify(setTimeout);
const MiB = 1024 * 1024;
const { args, work, cleanups, runMain } = benchScript(
  import.meta.url,
  'oauth-sidecar-cache-memory-',
  {
    requests: { type: 'string', default: '20000' },
    'max-bytes': { type: 'string', default: String(4 * MiB) },
    rounds: { type: 'string', default: '2' },
    'idle-ms': { type: 'string', default: '1000' },
    'node-flags': { type: 'string', default: '' },
  },
);
const REQUESTS = Number(args.requests);
const MAX_BYTES = Number(args['max-bytes']);
const WARM = 1000;

/**
 * `count` distinct GETs, 32 at a time, from `first` on; each must answer 200. `headers`:
 * `cache-control: no-store` forwards them the same way without storing them (the warm-up).
 */
async function flood(pool, first, count, headers = {}) {
  let next = first;
  const end = first + count;
  const worker = async () => {
    while (next < end) {
      const path = `/v1.0/contracts/?page=${next++}`;
      const res = await pool.request({ path, method: 'GET', headers });
      await res.body.dump();
      if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
}

/** SIGUSR2: the sidecar collects its garbage and writes its memory to `file`. */
async function memoryOf(proc, file) {
  // Settled as it would be when idle, before the forced collection: what a pod's RSS shows.
  await sleep(Number(args['idle-ms']));
  const idleRss = procStatusBytes(proc.pid, 'VmRSS');
  writeFileSync(file, '');
  process.kill(proc.pid, 'SIGUSR2');
  for (let i = 0; i < 100; i++) {
    await sleep(50);
    const text = readFileSync(file, 'utf8');
    if (text !== '') {
      const { heapUsed, external, spaces } = JSON.parse(text);
      const rss = procStatusBytes(proc.pid, 'VmRSS');
      return { idleRss, live: heapUsed + external, rss, spaces };
    }
  }
  throw new Error('no memory sample');
}

async function measure(pki, tokenUrl, upstream, name, extra) {
  const [port, adminPort] = await freePorts(2);
  const memoryFile = join(work, `${name}.memory.json`);
  const proc = startChild(
    process.execPath,
    [
      ...dockerEntrypointFlags(),
      ...args['node-flags'].split(' ').filter((flag) => flag !== ''),
      '--expose-gc',
      '--import',
      join(ROOT, 'bench', 'gc-on-signal.mjs'),
      join(ROOT, 'dist', 'main.js'),
    ],
    {
      env: {
        ...sidecarEnv({ upstream, tokenUrl, caFile: pki.caFile, proxyPort: port, adminPort }),
        ...shippedEnv(),
        MEMORY_FILE: memoryFile,
        ...extra,
      },
      logFile: join(work, `${name}.log`),
    },
  );
  const admin = `http://127.0.0.1:${adminPort}`;
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 32 });
  try {
    await waitForStatus(`${admin}/readyz`, { isAlive: () => !proc.exited });
    // Warm: connections and code paths exist before the baseline, the cache still empty.
    await flood(pool, 10_000_000, WARM, { 'cache-control': 'no-store' });
    const before = await memoryOf(proc, memoryFile);
    await flood(pool, 0, REQUESTS);
    const after = await memoryOf(proc, memoryFile);
    const status = await (await request(`${admin}/status`)).body.json();
    const spaces = Object.entries(after.spaces)
      .map(([space, size]) => [space, size - (before.spaces[space] ?? 0)])
      .filter(([, grown]) => Math.abs(grown) >= 256 * 1024);
    return {
      spaces,
      idleRss: after.idleRss - before.idleRss,
      rss: after.rss - before.rss,
      live: after.live - before.live,
      cache: status.cache ?? { entries: 0, bytes: 0 },
    };
  } finally {
    await pool.close();
    await proc.stop();
  }
}

async function main() {
  const pki = makePki(work);
  const standin = await startBenchStandin(pki, cleanups);
  // Small JSON answers, as an API's list pages or lookups are.
  const origin = createServer({ key: pki.serverKey, cert: pki.serverCert }, (req, res) => {
    const body = JSON.stringify({ url: req.url, data: 'x'.repeat(200) });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  });
  await new Promise((resolve) => origin.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => origin.close(resolve)));
  const upstream = `https://127.0.0.1:${origin.address().port}`;
  const tokenUrl = `${standin.url}/oauth/token/`;
  const cached = {
    CACHE_RULES: '/v1.0/=3600',
    CACHE_MAX_BYTES: String(MAX_BYTES),
    CACHE_MAX_ENTRIES: String(1_000_000),
  };
  say(
    `${REQUESTS} distinct answers of ~250 bytes; CACHE_MAX_BYTES=${MAX_BYTES}; node ${process.version}`,
  );
  let worst = 0;
  let undercount = 0;
  for (let round = 1; round <= Number(args.rounds); round++) {
    const without = await measure(pki, tokenUrl, upstream, `plain-${round}`, {});
    const withCache = await measure(pki, tokenUrl, upstream, `cached-${round}`, cached);
    const { entries, bytes } = withCache.cache;
    const mib = (n) => `${(n / MiB).toFixed(1)} MiB`;
    say(
      `round ${round}: no cache: RSS +${mib(without.idleRss)} (after GC +${mib(without.rss)}), ` +
        `heap+external +${mib(without.live)}; cache: RSS +${mib(withCache.idleRss)} ` +
        `(after GC +${mib(withCache.rss)}), heap+external +${mib(withCache.live)}, ` +
        `counted ${mib(bytes)} in ${entries} entries`,
    );
    for (const [name, run] of [
      ['no cache', without],
      ['cache', withCache],
    ]) {
      const grown = run.spaces.map(([space, size]) => `${space} ${mib(size)}`).join(', ');
      say(`  V8 committed after GC, ${name}: ${grown || 'no space grew by 0.25 MiB'}`);
    }
    if (entries > 0) {
      const held = (withCache.live - without.live) / entries;
      say(
        `  per entry: charged ${Math.round(bytes / entries)} B, held ${Math.round(held)} B ` +
          '(heap+external over the no-cache run)',
      );
      undercount = Math.max(undercount, held / (bytes / entries));
    }
    say(
      `  RSS growth / CACHE_MAX_BYTES: ${(withCache.idleRss / MAX_BYTES).toFixed(2)} ` +
        `(after GC ${(withCache.rss / MAX_BYTES).toFixed(2)})`,
    );
    worst = Math.max(worst, withCache.idleRss / MAX_BYTES);
  }
  say(`worst RSS growth / CACHE_MAX_BYTES: ${worst.toFixed(2)}`);
  return undercount > 1.1 ? 1 : 0;
}

await runMain('cache-memory', main);
