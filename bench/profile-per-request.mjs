// CPU per request by source file and by function, from the sidecar profiles of one bench run:
// where one configuration's extra microseconds go when whole-run ratios are too noisy to say
// (docs/benchmarks.md "Caller identity").
//
//   node bench/run.mjs --targets sidecar-bearer,sidecar-callers --fresh --warm-up 2 --keep \
//     "--sidecar-flags=--cpu-prof --cpu-prof-interval=200 --cpu-prof-dir=PROFILES" ...
//   node bench/profile-per-request.mjs --profiles PROFILES --work BENCH_WORK_DIR [--dist dist]
//     [--base sidecar-bearer] [--target sidecar-callers] [--under src/callers/] [--window 2]
//     [--rows 30]
//
// BENCH_WORK_DIR is the directory --keep leaves (<target>.log: one request line per request);
// --dist the build the profiles ran, whose source maps name each frame's source file (repeat it
// for an --alt-dist build: chunks are told apart by their hashed names). A process is matched to
// its log by start order: profiles by pid, log segments (each begins with the start-up "features in
// effect" line) by time. Only the last --window seconds of each process's requests count (the
// round, not start-up or warm-up): the profile is aligned to the log at the first request (its log
// time minus its duration is the first sample under proxy-handler.ts). Per target, summed over its
// processes: µs of main-thread self time per request in the window (idle excluded; a process whose
// sampler starved for over --min-coverage of it left out) by source file and by function, with the difference
// --target − --base; and the time spent under each --under prefix (frames of those files and
// everything they call).
import { readFileSync, readdirSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import process from 'node:process';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    profiles: { type: 'string' },
    work: { type: 'string' },
    dist: { type: 'string', multiple: true, default: ['dist'] },
    base: { type: 'string' },
    target: { type: 'string' },
    under: { type: 'string', multiple: true, default: ['src/callers/'] },
    window: { type: 'string', default: '2' },
    rows: { type: 'string', default: '30' },
    /** A function's name: its callers (the stacks above it, --depth frames) per target instead. */
    'callers-of': { type: 'string' },
    depth: { type: 'string', default: '4' },
    /** Leave out a process whose samples stand for less than this share (%) of its window. */
    'min-coverage': { type: 'string', default: '90' },
  },
});
if (args.profiles === undefined || args.work === undefined) {
  console.error('usage: --profiles DIR --work BENCH_WORK_DIR [--dist dist] (see the header)');
  process.exit(2);
}
const windowMs = Number(args.window) * 1000;
const rows = Number(args.rows);
const depth = Number(args.depth);
const minCoverage = Number(args['min-coverage']) / 100;
const GAP_TICKS = 10;
/** A process this far (a share) from its target's median µs per request is left out. */
const OUTLIER = 0.3;
const KEYS = ['files', 'functions', 'under', 'stacks'];

/** The source maps of the bundle and its chunks, by file name. */
const maps = new Map();
for (const dir of args.dist.flatMap((d) => [d, join(d, 'chunks')])) {
  for (const f of readdirSync(dir)) {
    if (f.endsWith('.js.map')) {
      // By path: both builds have a cli.js (and chunks of one content share a hashed name).
      maps.set(
        resolve(dir, f.slice(0, -4)),
        new SourceMap(JSON.parse(readFileSync(join(dir, f), 'utf8'))),
      );
    }
  }
}

/** A frame's source file: src/…, a package's file, node's own module, or V8's pseudo-frame. */
function fileOf({ url, lineNumber, columnNumber, functionName }) {
  if (url === '') return functionName.startsWith('(') ? functionName : `(native) ${functionName}`;
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const source = maps.get(path)?.findEntry(lineNumber, columnNumber)?.originalSource;
  if (source) return source.replace(/^(\.\.\/)+/, '').replace(/^.*node_modules\//, '');
  return url.replace(/^file:\/\/.*node_modules\//, '').replace(/^file:\/\//, '');
}

/** Each process's log: its start, and each request's [start, end] in wall ms. */
function segments(logFile, target) {
  const out = [];
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (line.includes('"features in effect')) {
      out.push({ target, startedAt: Date.parse(JSON.parse(line).time), requests: [] });
    } else if (line.includes('"msg":"request"')) {
      const r = JSON.parse(line);
      const end = Date.parse(r.time);
      out.at(-1)?.requests.push([end - (r.durationMs ?? 0), end]);
    }
  }
  return out;
}

const logs = readdirSync(args.work)
  .filter((f) => f.startsWith('sidecar') && f.endsWith('.log'))
  .flatMap((f) => segments(join(args.work, f), f.slice(0, -4)))
  .sort((a, b) => a.startedAt - b.startedAt);
const pidOf = (f) => Number(f.split('.')[3]);
const profiles = readdirSync(args.profiles)
  .filter((f) => f.endsWith('.cpuprofile'))
  .sort((a, b) => pidOf(a) - pidOf(b));
if (profiles.length !== logs.length) {
  console.error(`${profiles.length} profiles but ${logs.length} processes in the logs`);
  process.exit(1);
}

/** Self µs by file, by function and under each prefix over the window; requests ended in it. */
function analyse(profile, log) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const file = new Map(profile.nodes.map((n) => [n.id, fileOf(n.callFrame)]));
  /** The prefixes (and proxy-handler.ts) some frame of the stack ending at `id` belongs to. */
  const stackCache = new Map();
  const stackOf = (id) => {
    let found = stackCache.get(id);
    if (found === undefined) {
      found = new Set();
      for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
        const f = file.get(cur);
        if (f.endsWith('src/http/proxy-handler.ts')) found.add('handler');
        for (const prefix of args.under) if (f.startsWith(prefix)) found.add(prefix);
      }
      stackCache.set(id, found);
    }
    return found;
  };
  const times = [];
  let t = profile.startTime;
  for (const d of profile.timeDeltas) times.push((t += d));
  const first = profile.samples.findIndex((id) => stackOf(id).has('handler'));
  // A sample stands for the time since the one before, unless the sampler starved (a machine
  // loaded by others): a gap over GAP_TICKS ticks would put all of it on one stack, so it counts
  // as one tick and the rest as time the window was not seen.
  const tick = [...profile.timeDeltas].sort((a, b) => a - b)[profile.timeDeltas.length >> 1];
  // Profile µs → wall ms: the first handler sample is the first request's start.
  const wallOf = (i) => log.requests[0][0] + (times[i] - times[first]) / 1000;
  const last = log.requests.at(-1)[1];
  const from = last - windowMs;
  const out = {
    requests: log.requests.filter(([, end]) => end > from).length,
    files: new Map(),
    functions: new Map(),
    under: new Map(),
    stacks: new Map(),
  };
  const add = (map, key, us) => map.set(key, (map.get(key) ?? 0) + us);
  let seen = 0;
  for (let i = first; i < profile.samples.length; i++) {
    const wall = wallOf(i);
    if (wall <= from || wall > last) continue;
    const delta = profile.timeDeltas[i] ?? 0;
    const us = delta > GAP_TICKS * tick ? tick : delta;
    seen += us;
    const node = byId.get(profile.samples[i]);
    const f = file.get(node.id);
    add(out.files, f, us);
    add(out.functions, `${node.callFrame.functionName || '(anonymous)'} ${f}`, us);
    for (const prefix of args.under) if (stackOf(node.id).has(prefix)) add(out.under, prefix, us);
    if (node.callFrame.functionName === args['callers-of']) {
      const above = [];
      for (let cur = parent.get(node.id); cur !== undefined && above.length < depth;) {
        const frame = byId.get(cur).callFrame;
        above.push(`${frame.functionName || '(anonymous)'} ${file.get(cur)}:${frame.lineNumber}`);
        cur = parent.get(cur);
      }
      add(out.stacks, above.join(' < '), us);
    }
  }
  // A process whose sampler starved for long stands for part of its requests only.
  out.coverage = seen / (windowMs * 1000);
  return out;
}

/** Each process's analysis, by target; a process whose sampler starved is left out. */
const skipped = [];
const byTarget = new Map();
for (const [i, name] of profiles.entries()) {
  const log = logs[i];
  const a = analyse(JSON.parse(readFileSync(join(args.profiles, name), 'utf8')), log);
  if (a.coverage < minCoverage) {
    skipped.push(`${name} (${log.target}: the sampler saw ${(a.coverage * 100).toFixed(0)} %)`);
    continue;
  }
  a.name = name;
  a.busy = 0;
  for (const [k, us] of a.files) if (k !== '(idle)') a.busy += us / a.requests;
  byTarget.set(log.target, [...(byTarget.get(log.target) ?? []), a]);
}

// Profiles sample wall time: a process preempted by others' work for long (its µs per request
// far from its target's median) would weigh on the sums; it is left out too.
const targets = new Map();
for (const [target, runs] of byTarget) {
  const middle = [...runs].sort((a, b) => a.busy - b.busy)[runs.length >> 1].busy;
  const sum = { requests: 0, each: [] };
  for (const key of KEYS) sum[key] = new Map();
  for (const a of runs) {
    if (Math.abs(a.busy / middle - 1) > OUTLIER) {
      skipped.push(
        `${a.name} (${target}: ${a.busy.toFixed(0)} µs/request, median ${middle.toFixed(0)})`,
      );
      continue;
    }
    sum.each.push(a.busy);
    sum.requests += a.requests;
    for (const key of KEYS)
      for (const [k, us] of a[key]) sum[key].set(k, (sum[key].get(k) ?? 0) + us);
  }
  targets.set(target, sum);
}
if (skipped.length > 0) console.log(`left out: ${skipped.join(', ')}`);
const names = [...targets.keys()].sort();
const base = args.base ?? (targets.has('sidecar-bearer') ? 'sidecar-bearer' : names[0]);
const target = args.target ?? (targets.has('sidecar-callers') ? 'sidecar-callers' : names[1]);
for (const name of [base, target]) {
  if (name !== undefined && !targets.has(name)) {
    console.error(
      `no profile of ${name} is left to compare (kept: ${names.join(', ') || 'none'}); ` +
        'a sampler starved by --cpu-prof-interval on a busy machine: lower --min-coverage',
    );
    process.exit(1);
  }
}
const perRequest = (name, key, k) =>
  (targets.get(name)[key].get(k) ?? 0) / targets.get(name).requests;
const cell = (us) => us.toFixed(2).padStart(16);
const diff = (key, k) =>
  target === undefined ? 0 : perRequest(target, key, k) - perRequest(base, key, k);

for (const n of names) {
  const t = targets.get(n);
  const each = t.each.map((us) => us.toFixed(0)).join(' ');
  console.log(
    `${n}: ${t.requests} requests in the last ${args.window} s of ${t.each.length} processes; µs/request by process: ${each}`,
  );
}
const header = `${names.map((n) => n.padStart(16)).join('')}${`${target ?? ''} − ${base}`.padStart(34)}`;
function table(key, title) {
  const keys = [...new Set(names.flatMap((n) => [...targets.get(n)[key].keys()]))].filter(
    (k) => !k.startsWith('(idle)'),
  );
  console.log(`\n${header}  µs/request ${title}`);
  if (key === 'files' || key === 'functions') {
    const total = (n) => keys.reduce((s, k) => s + perRequest(n, key, k), 0);
    const d = target === undefined ? 0 : total(target) - total(base);
    console.log(`${names.map((n) => cell(total(n))).join('')}${cell(d).padStart(34)}  total`);
  }
  keys.sort((a, b) => Math.abs(diff(key, b)) - Math.abs(diff(key, a)));
  for (const k of keys.slice(0, rows)) {
    console.log(
      `${names.map((n) => cell(perRequest(n, key, k))).join('')}${cell(diff(key, k)).padStart(34)}  ${k}`,
    );
  }
}
if (args['callers-of'] !== undefined) {
  table('stacks', `in ${args['callers-of']}, by the frames above it`);
} else {
  table('under', 'under these files (their frames and all they call)');
  table('files', 'by source file (self time; main thread, idle excluded)');
  table('functions', 'by function (self time)');
}
