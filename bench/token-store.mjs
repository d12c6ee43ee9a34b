// What the shared token store costs, measured (docs/token-store.md quotes this):
//   - RSS of an idle sidecar with and without TOKEN_STORE_URL (the Redis client is loaded only then);
//   - Redis commands per second for a fleet of N idle sidecars with short tokens, by command;
//   - how long followers wait for the lease holder's new generation (polling every 100 ms),
//     from the processes' debug logs.
//
//   npm run build && node bench/token-store.mjs [--processes 3] [--seconds 30] [--lifetime 5]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  benchScript,
  freePort,
  makePki,
  procStatusBytes,
  ROOT,
  say,
  sidecarEnv,
  startBenchStandin,
  startChild,
  waitForStatus,
} from './lib.mjs';

const { args, work, cleanups, runMain } = benchScript(
  import.meta.url,
  'oauth-sidecar-store-bench-',
  {
    processes: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '30' },
    lifetime: { type: 'string', default: '5' },
  },
);
const N = Number(args.processes);

function redisCommand(port, line) {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    socket.on('error', reject);
    socket.on('data', (d) => (data += d));
    socket.on('end', () => resolve(data));
    socket.write(`${line}\r\nQUIT\r\n`);
  });
}

async function startRedis() {
  const port = await freePort();
  const child = spawn(
    process.env.REDIS_SERVER_BIN ?? 'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  cleanups.push(() => child.kill('SIGTERM'));
  for (let i = 0; i < 200; i++) {
    try {
      if ((await redisCommand(port, 'PING')).includes('PONG')) return port;
    } catch {
      // not yet
    }
    await sleep(25);
  }
  throw new Error('redis-server did not start');
}

async function startSidecars(count, { standin, pki, storeUrl, lifetimeMargin }) {
  const members = [];
  for (let i = 0; i < count; i++) {
    const [proxyPort, adminPort] = [await freePort(), await freePort()];
    const logFile = join(work, `sidecar-${storeUrl ? 'store' : 'alone'}-${i}.log`);
    const child = startChild(process.execPath, [join(ROOT, 'dist', 'main.js')], {
      env: sidecarEnv({
        upstream: standin.url,
        tokenUrl: `${standin.url}/oauth/token/`,
        caFile: pki.caFile,
        proxyPort,
        adminPort,
        extra: {
          CLIENT_ID: 'bench-client',
          CLIENT_SECRET: 'bench-secret',
          LOG_LEVEL: 'debug',
          TOKEN_REFRESH_MARGIN_SECONDS: String(lifetimeMargin),
          ...(storeUrl && { TOKEN_STORE_URL: storeUrl }),
        },
      }),
      logFile,
    });
    cleanups.push(() => child.stop());
    members.push({ child, logFile, admin: `http://127.0.0.1:${adminPort}` });
  }
  for (const m of members) await waitForStatus(`${m.admin}/readyz`, { timeoutMs: 30000 });
  return members;
}

const rssMiB = (m) => procStatusBytes(m.child.pid, 'VmRSS') / 1048576;

async function main() {
  const pki = makePki(work);
  const standin = await startBenchStandin(pki, cleanups, {
    tokenLifetimeSeconds: Number(args.lifetime),
  });
  const port = await startRedis();
  const storeUrl = `redis://127.0.0.1:${port}`;

  // RSS: one idle sidecar without a store, one with (settled 5 s after ready).
  const [alone] = await startSidecars(1, { standin, pki, storeUrl: undefined, lifetimeMargin: 1 });
  const [withStore] = await startSidecars(1, { standin, pki, storeUrl, lifetimeMargin: 1 });
  await sleep(5000);
  const rss = { alone: rssMiB(alone), store: rssMiB(withStore) };
  await Promise.all([alone.child.stop(), withStore.child.stop()]);
  await redisCommand(port, 'FLUSHALL');
  await redisCommand(port, 'CONFIG RESETSTAT');

  const grantsBefore = standin.tokenRequests.filter((r) => r.outcome === 'issued').length;
  const fleet = await startSidecars(N, { standin, pki, storeUrl, lifetimeMargin: 1 });
  const t0 = Date.now();
  await sleep(Number(args.seconds) * 1000);
  const seconds = (Date.now() - t0) / 1000;
  const stats = await redisCommand(port, 'INFO commandstats');
  const grants = standin.tokenRequests.filter((r) => r.outcome === 'issued').length - grantsBefore;
  for (const m of fleet) await m.child.stop();

  const calls = {};
  for (const match of stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g))
    calls[match[1]] = Number(match[2]);
  const total = Object.values(calls).reduce((a, b) => a + b, 0);

  // Follower waits: from "token request starting" to "adopted" in the same process, when the
  // process had to wait (it found the lease taken).
  const waits = [];
  let adoptions = 0;
  for (const m of fleet) {
    let startedAt;
    for (const line of readFileSync(m.logFile, 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      const entry = JSON.parse(line);
      const at = Date.parse(entry.time);
      if (entry.msg === 'token request starting') startedAt = at;
      if (entry.outcome === 'adopted' && startedAt !== undefined) {
        adoptions++;
        waits.push(at - startedAt);
        startedAt = undefined;
      }
    }
  }
  waits.sort((a, b) => a - b);
  const pct = (p) => waits[Math.min(waits.length - 1, Math.floor(p * waits.length))] ?? NaN;

  say();
  say(`| measure | value |`);
  say(`|---|---|`);
  say(`| RSS of an idle sidecar, no store | ${rss.alone.toFixed(1)} MiB |`);
  say(`| RSS of an idle sidecar, with TOKEN_STORE_URL | ${rss.store.toFixed(1)} MiB |`);
  say(
    `| fleet | ${N} processes, ${args.lifetime} s tokens (renewed ~1 s before expiry), ${seconds.toFixed(0)} s, no load |`,
  );
  say(`| grants for the fleet | ${grants} |`);
  say(`| adoptions | ${adoptions} |`);
  say(
    `| Redis commands | ${total} (${(total / seconds).toFixed(1)}/s; ${Object.entries(calls)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}) |`,
  );
  say(
    `| per process per second | ${(total / seconds / N).toFixed(2)} (of which PING health checks ${((calls.ping ?? 0) / seconds / N).toFixed(2)}) |`,
  );
  say(
    `| follower: renewal start → adopted | median ${pct(0.5)} ms, p90 ${pct(0.9)} ms, max ${waits.at(-1) ?? NaN} ms (${waits.length} adoptions) |`,
  );
  say(`- node ${process.version}`);
  return 0;
}

await runMain('token-store bench', main);
