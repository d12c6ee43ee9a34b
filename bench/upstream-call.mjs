// The upstream call's own CPU (docs/benchmarks.md "Hot path"): one call's whole life per loop
// iteration (start, head, two 2 KB chunks, end, the client's finish), driven with a hand-made
// undici controller and client response, this checkout's src/proxy/upstream-call.ts against
// another checkout's, bundled each with esbuild into bench/results/. Alternating loops in one
// process; CPU per call from process.cpuUsage. Prints; writes only the bundles.
//
//   node bench/upstream-call.mjs --alt-src /path/to/other/checkout [--loops 10] [--calls 200000]
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { ROOT, median, say } from './lib.mjs';

const { values: args } = parseArgs({
  options: {
    'alt-src': { type: 'string' },
    loops: { type: 'string', default: '10' },
    calls: { type: 'string', default: '200000' },
  },
});
if (args['alt-src'] === undefined) throw new Error('--alt-src <checkout> is required');
const out = join(ROOT, 'bench/results/upstream-call');
mkdirSync(out, { recursive: true });

/** The checkout's UpstreamCall class, bundled (runtime packages stay external). */
async function load(checkout, name) {
  const outfile = join(out, `${name}.mjs`);
  await build({
    entryPoints: [join(checkout, 'src/proxy/upstream-call.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile,
    logLevel: 'warning',
  });
  return (await import(pathToFileURL(outfile).href)).UpstreamCall;
}

class Response extends EventEmitter {
  writableEnded = false;
  writableFinished = false;
  writableLength = 0;
  destroyed = false;
  writeHead() {
    return this;
  }
  write() {
    return true;
  }
  end() {
    this.writableEnded = true;
    this.writableFinished = true;
    this.emit('finish');
    return this;
  }
}

const decision = { replay: false, headers: {}, bodiless: false, taps: [] };
const hooks = { onHead: () => decision, onError: (_call, err) => err, onSettled: () => {} };
const controller = {
  aborted: false,
  paused: false,
  reason: null,
  rawHeaders: [],
  abort() {},
  pause() {},
  resume() {},
};
const chunk = Buffer.alloc(2048);

/** CPU nanoseconds per call over `n` calls. */
function loop(UpstreamCall, n) {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const call = new UpstreamCall(new Response(), hooks, true, undefined);
    call.onRequestStart(controller);
    call.onResponseStart(controller, 200, {});
    call.onResponseData(controller, chunk);
    call.onResponseData(controller, chunk);
    call.onResponseEnd();
  }
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / n;
}

const current = await load(ROOT, 'this');
const other = await load(args['alt-src'], 'other');
const calls = Number(args.calls);
loop(current, calls);
loop(other, calls);
const ratios = [];
for (let i = 0; i < Number(args.loops); i++) {
  const first = i % 2 === 0 ? current : other;
  const a = loop(first, calls);
  const b = loop(first === current ? other : current, calls);
  const [mine, theirs] = first === current ? [a, b] : [b, a];
  ratios.push(mine / theirs);
  say(`loop ${i + 1}: this ${mine.toFixed(0)} ns/call, other ${theirs.toFixed(0)} ns/call`);
}
say(`this / other, CPU per call (median of ${ratios.length} loops): ${median(ratios).toFixed(3)}×`);
