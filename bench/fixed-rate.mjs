// Open-loop load at a fixed rate (wrk cannot fix the rate and wrk2 is not in Debian): request i is
// due at start + i/rate whatever happened before, and its latency is measured from that due time,
// so a stall shows up in the percentiles instead of slowing the sender (no coordinated omission).
// Usage: node bench/fixed-rate.mjs <url> <rate/s> <seconds> [connections] [caFile]
// Prints one JSON line: { due, ok, non2xx, errors, unfinished, rate, p50, p90, p99, p999, max }
// (ms); requests still unanswered 10 s after the last send count as unfinished, at their age.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL } from 'node:url';
import { Pool } from 'undici';

const [url, rateArg, secondsArg, connectionsArg = '50', caFile] = process.argv.slice(2);
const rate = Number(rateArg);
const seconds = Number(secondsArg);
const target = new URL(url);
const pool = new Pool(target.origin, {
  connections: Number(connectionsArg),
  pipelining: 1,
  connect: caFile ? { ca: readFileSync(caFile, 'utf8') } : undefined,
});
const path = `${target.pathname}${target.search}`;
const warmup = Math.round(rate); // the first second is not recorded
const total = warmup + Math.round(rate * seconds);
const latencies = new Float64Array(total - warmup);
let recorded = 0;
let ok = 0;
let non2xx = 0;
let errors = 0;
let done = 0;
/** Due times of requests still in flight, so a saturated target cannot hide its slowest ones. */
const outstanding = new Map();
let allDone;
const finished = new Promise((resolve) => (allDone = resolve));

function fire(index, due) {
  if (index >= warmup) outstanding.set(index, due);
  pool
    .request({ path, method: 'GET' })
    .then(async (res) => {
      await res.body.dump();
      if (index >= warmup && outstanding.delete(index)) {
        latencies[recorded++] = performance.now() - due;
        if (res.statusCode >= 200 && res.statusCode < 300) ok++;
        else non2xx++;
      }
    })
    .catch(() => {
      if (index >= warmup && outstanding.delete(index)) errors++;
    })
    .finally(() => {
      if (++done === total) allDone();
    });
}

const interval = 1000 / rate;
const start = performance.now() + 10;
let next = 0;
while (next < total) {
  const now = performance.now();
  while (next < total && start + next * interval <= now) {
    fire(next, start + next * interval);
    next++;
  }
  await sleep(Math.max(0, Math.min(1, start + next * interval - performance.now())));
}
await Promise.race([finished, sleep(10000)]);
// Still unanswered 10 s after the last send: count them at their age so far (a lower bound).
const unfinished = outstanding.size;
for (const due of outstanding.values()) latencies[recorded++] = performance.now() - due;
outstanding.clear();
await pool.destroy();
const sorted = latencies.slice(0, recorded).sort();
const pct = (p) => sorted[Math.min(recorded - 1, Math.max(0, Math.ceil((p / 100) * recorded) - 1))];
const round = (n) => (n === undefined ? null : Math.round(n * 1000) / 1000);
process.stdout.write(
  `${JSON.stringify({
    due: total - warmup,
    ok,
    non2xx,
    errors,
    unfinished,
    rate,
    p50: round(pct(50)),
    p90: round(pct(90)),
    p99: round(pct(99)),
    p999: round(pct(99.9)),
    max: round(sorted[recorded - 1]),
  })}\n`,
);
