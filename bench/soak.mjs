// Soak: the real sidecar (node dist/main.js) in front of the real stand-in over HTTPS, under
// constant load, through these phases:
//   a) tokens live a few seconds: many renewals, zero non-2xx, zero upstream 401s;
//   b) the token endpoint fails half its calls and answers in 2 s: no failure while a token is valid;
//   c) the token endpoint is down past expiry: only 503 token_unavailable, then 200s again within
//      one backoff step of it coming back;
//   d) upstream resets, timeouts and clients leaving mid-answer: 502/504 only for those requests,
//      no crash, file descriptors and memory back where they were;
//   e) a fleet: three more sidecar processes sharing one token through a real redis-server
//      (TOKEN_STORE_URL), short tokens, the token endpoint failing a third of its calls: the fleet
//      makes about one grant per renewal (not one per process), no failed request;
//   f) a fleet that trusts nothing its store says: three processes, a slow token endpoint that
//      rejects any refresh token presented twice (the stand-in's are single-use), short tokens, one
//      store restart (emptied) and one rollback of the entry to an older copy: no refresh token
//      presented twice, at most 1 failed request in 1,000, one grant per lifetime afterwards;
//   g) behind an egress proxy: one sidecar with HTTPS_PROXY naming a real tinyproxy with Basic
//      credentials, token and API through CONNECT, short tokens, the proxy restarted mid-phase:
//      requests fail only while it is down, 200s again after, the proxy's password in no output;
//   h) a Redis Cluster fail-over (bench/soak-cluster.mjs): 3 masters + 3 replicas, two sidecars
//      with STORE_MODE=cluster under steady load, the busiest master SIGKILLed: no failed request,
//      the fleet sharing again within 20 s of the cluster being whole.
//
//   npm run build && node bench/soak.mjs [--duration 60] [--ci] [--phases a-d,e,f,g,h]
//                                        [--node /path/to/node]
//
// Without --ci the phases run one after the other in this process. --ci (short phases) runs them
// in three lanes side by side (LANES), each a process of this script with --phases and its own
// stand-in, token front, sidecars, Redis and proxy: a-d (one sidecar, its memory measured around
// them), f then e, g then h; e, g and h send PACED_RATE requests per second so a-d keep the CPU.
//
// Memory method: after a warm-up (every code path taken once), the load stops, idle keep-alive
// sockets time out, and a full GC is forced through the inspector protocol (the sidecar is started
// with --inspect=127.0.0.1:0; nothing in the sidecar changes). RSS (/proc VmRSS), V8 heap used and
// open fds (/proc/<pid>/fd) are read then, and again the same way after phase d.
// Exits 1 on any violated expectation.
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { join } from 'node:path';
import process from 'node:process';
import { clearInterval, clearTimeout, setInterval, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool, WebSocket, request } from 'undici';
import {
  ROOT,
  caAgent,
  fmt,
  freePorts,
  makePki,
  makeWorkDir,
  metricSum,
  procStatusBytes,
  runScript,
  say,
  scrape,
  sidecarEnv,
  startChild,
  startRedisServer,
  waitForStatus,
} from './lib.mjs';
import { clusterPhase } from './soak-cluster.mjs';
import { startTinyproxy } from './tinyproxy.mjs';

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: process.env.SOAK_DURATION ?? '60' },
    ci: { type: 'boolean', default: false },
    node: { type: 'string', default: process.env.SOAK_NODE ?? process.execPath },
    concurrency: { type: 'string', default: '20' },
    'sidecar-flags': { type: 'string', default: process.env.SOAK_SIDECAR_FLAGS ?? '' },
    phases: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const CI = args.ci;
const D = CI ? 15 : Number(args.duration);
const PLAN = {
  // 5 s tokens as issue 4 asks, renewed at half-life: one renewal every ~2.5 s. CI runs 16 s, ≥ 5
  // renewals (6 expected): the handover repeated under load, each with zero non-2xx; d, e, g and h
  // cross about 20 more handovers with zero failed requests. Shorter tokens leave less slack than
  // this VM's occasional 1.5 s stalls and make the soak flaky.
  a: { seconds: CI ? 16 : D, lifetime: 5, minRenewals: CI ? 5 : 10 },
  b: { seconds: CI ? 12 : D, lifetime: CI ? 6 : 10, delayMs: 2000, failRatio: 0.5 },
  c: { outageSeconds: CI ? 4 : Math.max(10, D / 3), lifetime: 3 },
  // Each of the two abusive connections takes the four kinds in turn, one turn in ~5.7 s (the
  // slow request waits out the 5 s upstream timeout): 8 s in CI cover a turn of each.
  d: { seconds: CI ? 8 : D },
  e: { seconds: CI ? 20 : D, lifetime: 5, failRatio: 0.3, processes: 3 },
  // Renewal ~2.1 s before expiry (35 % of 6 s), token calls answered in 1.5 s.
  f: { seconds: CI ? 32 : Math.max(32, D), lifetime: 6, delayMs: 1500, processes: 3 },
  // The proxy is stopped and started again at 40 % of the phase.
  g: { seconds: CI ? 16 : Math.max(16, D), lifetime: 5 },
  // Load before the kill and after sharing again, half each.
  h: { loadSeconds: CI ? 10 : Math.max(10, D) },
};
const CONCURRENCY = Number(args.concurrency);
/**
 * Requests per second in all for phases e, g and h in CI, where they run beside a-d (LANES):
 * steady load for their sidecars without taking the CPU from a-d, whose load runs as fast as it
 * goes. Their expectations (no failed request but around a proxy restart, grants per renewal,
 * sharing again after a fail-over) need requests all the time, not the most the machine can
 * serve. Phase f keeps its load as fast as it goes (distrustPhase says why).
 */
const PACED_RATE = CI ? 500 : undefined;
/**
 * The sidecar's upstream timeout. Generous: this VM stalls for up to ~1.5 s at times (CPU steal;
 * the soak process hosts the stand-in), and an ordinary request must not time out then. Phase d's
 * slow route waits longer than this to exercise the timeout on purpose.
 */
const UPSTREAM_TIMEOUT_MS = 5000;
/** A token round trip plus the first proxied request, on a loaded 2-core box. */
const RECOVERY_SLACK_MS = 2500;
const SETTLE_MS = 4500; // > the upstream dispatcher's 4 s keep-alive timeout

const work = makeWorkDir('oauth-sidecar-soak-');
const violations = [];
const cleanups = [];
const check = (ok, message) => {
  if (!ok) violations.push(message);
  return ok;
};

// ---- token validity bookkeeping (from the stand-in's own records) ----
const lifetimes = [{ from: 0, seconds: PLAN.a.lifetime }];
let standin;
function setLifetime(seconds) {
  lifetimes.push({ from: Date.now(), seconds });
  standin.setTokenLifetime(seconds);
}
const lifetimeAt = (t) => lifetimes.filter((l) => l.from <= t).pop().seconds;
/** When the token front received each call and when it passed it on to the stand-in. */
const frontCalls = [];
/** Expiry as the sidecar sees it: counted from when it sent the request (before any front delay). */
function expiryOf(r) {
  const call = frontCalls.filter((c) => c.forwardedAt <= r.at).pop();
  return (call ? call.receivedAt : r.at) + lifetimeAt(r.at) * 1000;
}
const issued = () => standin.tokenRequests.filter((r) => r.outcome === 'issued');
/** True when some token the stand-in issued was valid from `start` to `end` + 1 s. */
function tokenValidThroughout(start, end) {
  return issued().some((r) => r.at <= start && expiryOf(r) >= end + 1000);
}

// ---- load ----
function phaseStats(name) {
  const soakLoop = monitorEventLoopDelay({ resolution: 10 });
  soakLoop.enable();
  return {
    /** Ends the watch on this process's event loop: `soakLagMs`, its longest stall in the phase. */
    stopSoakLag() {
      soakLoop.disable();
      this.soakLagMs = soakLoop.max / 1e6;
    },
    name,
    start: Date.now(),
    requests: 0,
    byOutcome: new Map(),
    renewals: 0,
    upstream401: 0,
    maxRss: 0,
    maxFds: 0,
    excused503: 0,
    notes: [],
    samples: [],
    /** outcome -> the first few requests that had it: `+start ms (took N ms)`, for diagnosis. */
    timings: new Map(),
    /** When each answer that was not a 2xx arrived (the first 10,000). */
    failedAt: [],
  };
}
let phase = phaseStats('warm-up');
phase.stopSoakLag();
const phases = [];
const count = (key, start) => {
  phase.byOutcome.set(key, (phase.byOutcome.get(key) ?? 0) + 1);
  if (start === undefined) return;
  if (phase.failedAt.length < 10_000) phase.failedAt.push(Date.now());
  const seen = phase.timings.get(key) ?? [];
  if (seen.length < 4) seen.push(`+${start - phase.start} ms (took ${Date.now() - start} ms)`);
  phase.timings.set(key, seen);
};
let mix = () => 'normal';
let retryAfterSeen = [];
let firstOkAfter;

async function one(pool, kind) {
  const start = Date.now();
  const spec = {
    normal: () =>
      Math.random() < 0.8
        ? { path: '/v1.0/contracts/', method: 'GET' }
        : { path: '/v1.0/echo/soak', method: 'POST', body: Buffer.alloc(1024, 'x') },
    reset: () => ({ path: '/v1.0/reset', method: 'GET' }),
    slow: () => ({ path: `/v1.0/slow/${UPSTREAM_TIMEOUT_MS + 500}`, method: 'GET' }),
    'abort-slow': () => ({ path: '/v1.0/slow/800', method: 'GET', abortAfterMs: 100 }),
    'abort-body': () => ({
      path: '/v1.0/bytes/5000000',
      method: 'GET',
      abortAfterFirstChunk: true,
    }),
  }[kind]();
  const controller = new AbortController();
  const timer = spec.abortAfterMs
    ? setTimeout(() => controller.abort(), spec.abortAfterMs)
    : undefined;
  try {
    const res = await pool.request({
      path: spec.path,
      method: spec.method,
      body: spec.body,
      signal: controller.signal,
      headersTimeout: 15000,
      bodyTimeout: 15000,
    });
    if (spec.abortAfterFirstChunk) {
      for await (const _chunk of res.body) break; // leaving the loop destroys the body mid-answer
      count(`${kind}:left`);
      return;
    }
    const text = await res.body.text();
    const end = Date.now();
    phase.requests++;
    let code = '';
    if (res.statusCode >= 400) {
      try {
        code = JSON.parse(text).errors?.[0]?.code ?? '';
      } catch {
        code = 'not-json';
      }
    }
    if (res.statusCode === 503 && code === 'token_unavailable') {
      retryAfterSeen.push({ at: end, seconds: Number(res.headers['retry-after']) });
      if (res.headers['retry-after'] === undefined)
        check(false, `${phase.name}: 503 without Retry-After`);
      if (kind === 'normal' && !tokenValidThroughout(start, end)) {
        phase.excused503++;
        count(`${kind}:503 token_unavailable (no valid token)`);
        return;
      }
      if (phase.samples.length < 3) {
        const last = issued()
          .filter((r) => r.at <= start)
          .pop();
        phase.samples.push(
          `503 token_unavailable for a request from +${start - phase.start} ms to +${end - phase.start} ms; ` +
            `newest token issued at +${last.at - phase.start} ms, sidecar-side expiry +${expiryOf(last) - phase.start} ms`,
        );
      }
    }
    if (res.statusCode < 300 && firstOkAfter && start >= firstOkAfter.since && !firstOkAfter.at) {
      firstOkAfter.at = end;
    }
    count(
      `${kind}:${res.statusCode}${code ? ` ${code}` : ''}`,
      res.statusCode >= 300 ? start : undefined,
    );
  } catch (err) {
    if (timer && controller.signal.aborted) count(`${kind}:left`);
    else count(`${kind}:client error ${err.code ?? err.name}`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `connections` workers, each sending its next request when the last one is answered: as fast as
 * they go, or at `rate` requests per second in all (each worker waits out its share of a second).
 */
function startLoad(origin, connections, rate) {
  const pool = new Pool(origin, { connections, pipelining: 1 });
  const spacingMs = rate ? (connections * 1000) / rate : 0;
  let running = true;
  const workers = Array.from({ length: connections }, async (_, i) => {
    while (running) {
      const next = Date.now() + spacingMs;
      await one(pool, mix(i));
      if (spacingMs && running) await sleep(Math.max(0, next - Date.now()));
    }
  });
  return async () => {
    running = false;
    await Promise.all(workers);
    await pool.close();
  };
}

// ---- the sidecar's process ----
async function forceGc(inspectorUrl) {
  const ws = new WebSocket(inspectorUrl);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  const done = new Promise((resolve) => {
    ws.onmessage = (event) => {
      if (JSON.parse(String(event.data)).id === 2) resolve();
    };
  });
  ws.send(JSON.stringify({ id: 1, method: 'HeapProfiler.enable' }));
  ws.send(JSON.stringify({ id: 2, method: 'HeapProfiler.collectGarbage' }));
  await done;
  ws.close();
}

const fdCount = (pid) => readdirSync(`/proc/${pid}/fd`).length;

async function snapshot(pid, admin, inspectorUrl) {
  await sleep(SETTLE_MS);
  await forceGc(inspectorUrl);
  await sleep(200);
  const metrics = await scrape(admin);
  return {
    rss: procStatusBytes(pid, 'VmRSS'),
    heapUsed: metricSum(metrics, 'oauth_sidecar_nodejs_heap_size_used_bytes'),
    fds: fdCount(pid),
    handles: metricSum(metrics, 'oauth_sidecar_nodejs_active_handles_total'),
  };
}

/** A front for the token endpoint that can answer slowly: forwards to the stand-in after `delayMs`. */
async function startTokenFront(pki, target) {
  const front = { delayMs: 0, calls: 0 };
  const agent = caAgent(pki.caCert);
  const server = createServer({ key: pki.serverKey, cert: pki.serverCert }, (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    const receivedAt = Date.now();
    req.on('end', () => {
      front.calls++;
      const forward = async () => {
        if (front.delayMs) await sleep(front.delayMs);
        frontCalls.push({ receivedAt, forwardedAt: Date.now() });
        const headers = { ...req.headers };
        delete headers.host;
        delete headers.connection;
        try {
          const up = await request(`${target}${req.url}`, {
            method: req.method,
            headers,
            body: Buffer.concat(chunks),
            dispatcher: agent,
          });
          const body = Buffer.from(await up.body.arrayBuffer());
          const out = { ...up.headers };
          delete out['transfer-encoding'];
          delete out.connection;
          delete out['keep-alive'];
          out['content-length'] = String(body.length);
          res.writeHead(up.statusCode, out).end(body);
        } catch {
          req.socket.destroy(); // the stand-in reset the connection: do the same
        }
      };
      void forward();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise((resolve) => {
        server.close(resolve);
        server.closeAllConnections();
      }),
  );
  return { front, url: `https://127.0.0.1:${server.address().port}` };
}

function startRedis() {
  return startRedisServer(cleanups);
}

/** The environment of a soak sidecar: the stand-in upstream behind the flaky token front. */
function soakEnv(pki, frontUrl, proxyPort, adminPort, extra = {}) {
  return sidecarEnv({
    upstream: standin.url,
    tokenUrl: `${frontUrl}/oauth/token/`,
    caFile: pki.caFile,
    proxyPort,
    adminPort,
    extra: {
      CLIENT_ID: 'soak-client',
      CLIENT_SECRET: 'soak-secret',
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
      TOKEN_WAIT_MS: '1000',
      ...extra,
    },
  });
}

/** Start `count` sidecars named `name-<i>` with `extra` environment (not yet waited for). */
async function startFleet(pki, frontUrl, name, count, extra) {
  const members = [];
  for (let i = 0; i < count; i++) {
    const [proxyPort, adminPort] = await freePorts(2);
    const child = startChild(args.node, [join(ROOT, 'dist', 'main.js')], {
      env: soakEnv(pki, frontUrl, proxyPort, adminPort, extra),
      logFile: join(work, `${name}-${i}.log`),
    });
    cleanups.push(() => child.stop());
    members.push({
      child,
      origin: `http://127.0.0.1:${proxyPort}`,
      admin: `http://127.0.0.1:${adminPort}`,
    });
  }
  return members;
}

/** Every member ready (`/readyz`), within 20 s each. */
async function fleetReady(members) {
  for (const m of members) {
    await waitForStatus(`${m.admin}/readyz`, { isAlive: () => !m.child.exited, timeoutMs: 20000 });
  }
}

/**
 * Phase e: a fleet of sidecars sharing one token through Redis, with a flaky token endpoint.
 * Grants are counted at the stand-in; without a store each process would make its own.
 */
async function fleetPhase(pki, frontUrl, runFleetPhase) {
  const redis = await startRedis();
  const members = await startFleet(pki, frontUrl, 'fleet', PLAN.e.processes, {
    TOKEN_STORE_URL: redis.url,
    // Renew about 1 s before expiry (not at half-life): one grant per 5 s token.
    TOKEN_REFRESH_MARGIN_SECONDS: '1',
  });
  await fleetReady(members);
  const commandsOf = async () =>
    Number(/total_commands_processed:(\d+)/.exec(await redis.command('INFO stats'))?.[1] ?? NaN);
  const commandsBefore = await commandsOf();
  const attemptsBefore = standin.tokenRequests.length;
  let maxRss = 0;
  let maxFds = 0;
  const sampler = setInterval(() => {
    for (const m of members) {
      if (m.child.exited) continue;
      maxRss = Math.max(maxRss, procStatusBytes(m.child.pid, 'VmRSS'));
      maxFds = Math.max(maxFds, fdCount(m.child.pid));
    }
  }, 1000);
  const e = await runFleetPhase(members);
  clearInterval(sampler);
  e.maxRss = maxRss;
  e.maxFds = maxFds;
  const seconds = (Date.now() - e.start) / 1000;
  const attempts = standin.tokenRequests.length - attemptsBefore;
  const commands = (await commandsOf()) - commandsBefore;
  let adopted = 0;
  let storeUp = 0;
  for (const m of members) {
    const metrics = await scrape(m.admin);
    adopted += metricSum(metrics, 'oauth_sidecar_token_adopted_total');
    storeUp += metricSum(metrics, 'oauth_sidecar_token_store_up');
    check(!m.child.exited, 'e: a fleet member exited');
  }
  // Renewal about 1-1.1 s before expiry: a token lasts ~3.9 s; a lone process makes that many
  // grants, a fleet without a store three times as many.
  const perProcess = seconds / (PLAN.e.lifetime - 1.1);
  e.notes.push(
    `${PLAN.e.processes} processes, ${seconds.toFixed(0)} s, ${PLAN.e.lifetime} s tokens, ` +
      `${Math.round(PLAN.e.failRatio * 100)}% of token calls fail: ${e.renewals} grants ` +
      `(${attempts} token calls) for the fleet vs ~${perProcess.toFixed(0)} per process alone ` +
      `(~${(perProcess * PLAN.e.processes).toFixed(0)} for ${PLAN.e.processes} without a store); ` +
      `${adopted} adoptions; ${(commands / seconds).toFixed(1)} Redis commands/s (health pings included)`,
  );
  check(
    storeUp === PLAN.e.processes,
    `e: token_store_up is 1 on ${storeUp} of ${PLAN.e.processes}`,
  );
  check(
    e.renewals <= perProcess * 1.25 + 2,
    `e: ${e.renewals} grants in ${seconds.toFixed(0)} s for the fleet (one process alone: ~${perProcess.toFixed(0)})`,
  );
  check(adopted >= PLAN.e.processes - 1, `e: only ${adopted} adoptions`);
  only(e, (k) => /^normal:2\d\d$/.test(k) || k.includes('(no valid token)'));
  check(e.excused503 === 0, `e: ${e.excused503} × 503 token_unavailable`);
  // Phase f counts its own fleet's grants only.
  await Promise.all(members.map((m) => m.child.stop()));
}

/** Fields of a hash from a raw RESP `HGETALL` reply. */
const respFields = (reply) =>
  reply.split('\r\n').filter((line, i) => i > 0 && line !== '' && !/^[$*]/.test(line));

/**
 * Phase f: what the store says is never trusted (docs/token-store.md). A fresh fleet and store, a
 * slow token endpoint whose refresh tokens are single-use (a second presentation is refused, as an
 * identity provider with reuse detection does), a store restart, then the entry rolled back to a
 * copy taken before it (an older generation whose refresh token was spent long ago).
 */
async function distrustPhase(pki, front, frontUrl) {
  const redis = await startRedis();
  const members = await startFleet(pki, frontUrl, 'distrust', PLAN.f.processes, {
    TOKEN_STORE_URL: redis.url,
    TOKEN_REFRESH_MARGIN_SECONDS: '1',
    TOKEN_REFRESH_FRACTION: '0.35',
  });
  standin.clearTokenFaults();
  setLifetime(PLAN.f.lifetime);
  front.delayMs = PLAN.f.delayMs;
  await fleetReady(members);
  phase = phaseStats(
    `f fleet of ${PLAN.f.processes}, endpoint ${PLAN.f.delayMs / 1000} s, store restart + rollback`,
  );
  phases.push(phase);
  const firstRequest = standin.tokenRequests.length;
  const tokensBefore = issued().length;
  mix = () => 'normal';
  // As fast as the connections go, also in CI: a failure costs each stuck connection one request
  // whatever the rate, so at a fixed rate the 1-in-1,000 bound below would mean something else.
  const per = Math.max(1, Math.floor(CONCURRENCY / members.length));
  const stops = members.map((m) => startLoad(m.origin, per));
  const at = (fraction) => phase.start + PLAN.f.seconds * 1000 * fraction;
  const until = (t) => sleep(Math.max(0, t - Date.now()));

  const entryKey = async () =>
    respFields(await redis.command('KEYS oauth-sidecar:token:*')).find((k) =>
      k.includes(':token:'),
    );
  await until(at(0.15));
  const key = await entryKey();
  const saved = key === undefined ? [] : respFields(await redis.command(`HGETALL ${key}`));
  check(saved.length > 0, 'f: no token-set entry in the store to save');
  await until(at(0.3));
  await redis.restart();
  phase.notes.push(`store restarted (emptied) at +${Date.now() - phase.start} ms`);
  await until(at(0.5));
  const current = key === undefined ? [] : respFields(await redis.command(`HGETALL ${key}`));
  const gen = (fields) => Number(fields[fields.indexOf('gen') + 1] ?? NaN);
  if (key !== undefined && saved.length > 0) {
    await redis.command(`DEL ${key}`);
    await redis.command(`HSET ${key} ${saved.join(' ')}`);
    phase.notes.push(
      `entry rolled back from generation ${gen(current)} to ${gen(saved)} at +${Date.now() - phase.start} ms`,
    );
  }
  const settledFrom = at(0.7);
  await until(at(1));
  await Promise.all(stops.map((stop) => stop()));
  front.delayMs = 0;
  for (const r of standin.apiRequests.splice(0)) if (r.status === 401) phase.upstream401++;
  phase.renewals = issued().length - tokensBefore;
  phase.sidecarLagMs = 0;
  phase.stopSoakLag();

  const calls = standin.tokenRequests.slice(firstRequest);
  const presented = calls.filter((r) => r.grant === 'refresh_token' && r.refreshToken);
  const twice = presented.length - new Set(presented.map((r) => r.refreshToken)).size;
  const refused = calls.filter((r) => r.outcome === 'rejected').length;
  let failed = 0;
  for (const [k, n] of phase.byOutcome) if (!/^normal:2\d\d$/.test(k)) failed += n;
  const lastWindowS = (Date.now() - settledFrom) / 1000;
  const lateGrants = calls.filter((r) => r.outcome === 'issued' && r.at >= settledFrom).length;
  // One grant per lifetime: renewal ~2.1-2.3 s before expiry and 1.5 s in flight, so a token
  // serves ~3.7 s, plus one in flight at the window's edge.
  const perLifetime = Math.ceil(lastWindowS / (PLAN.f.lifetime - 2.31)) + 1;
  phase.notes.push(
    `${presented.length} refresh tokens presented, ${twice} twice, ${refused} token calls refused; ` +
      `${failed} of ${phase.requests} requests failed; last ${lastWindowS.toFixed(0)} s: ${lateGrants} grants ` +
      `(one per lifetime: ≤ ${perLifetime})`,
  );
  check(twice === 0, `f: ${twice} refresh tokens presented twice`);
  check(refused === 0, `f: ${refused} token calls refused`);
  check(
    failed * 1000 <= phase.requests,
    `f: ${failed} of ${phase.requests} requests failed (> 1 in 1,000)`,
  );
  check(
    lateGrants <= perLifetime,
    `f: ${lateGrants} grants in the last ${lastWindowS.toFixed(0)} s (> ${perLifetime})`,
  );
  check(phase.requests > 1000, `f: only ${phase.requests} requests`);
  await Promise.all(members.map((m) => m.child.stop()));
}

/**
 * Phase g: one sidecar behind a real forward proxy (tinyproxy with Basic credentials), the token
 * endpoint and the API both reached through `CONNECT`, short tokens, the proxy stopped and started
 * again mid-phase. Requests may fail only from the stop until shortly after the start.
 */
async function egressPhase(pki, frontUrl) {
  const password = 'soak-proxy-pass-5c1e';
  const targets = [new URL(standin.url).host, new URL(frontUrl).host];
  const dir = join(work, 'tinyproxy');
  const proxy = await startTinyproxy({
    user: 'soak',
    password,
    connectPorts: targets.map((host) => Number(host.split(':')[1])),
    dir,
  });
  cleanups.push(() => proxy.close());
  const [proxyPort, adminPort] = await freePorts(2);
  const logFile = join(work, 'egress.log');
  const child = startChild(args.node, [join(ROOT, 'dist', 'main.js')], {
    env: soakEnv(pki, frontUrl, proxyPort, adminPort, { HTTPS_PROXY: proxy.url() }),
    logFile,
  });
  cleanups.push(() => child.stop());
  const admin = `http://127.0.0.1:${adminPort}`;
  setLifetime(PLAN.g.lifetime);
  await waitForStatus(`${admin}/readyz`, { isAlive: () => !child.exited, timeoutMs: 20000 });
  phase = phaseStats(`g through an egress proxy (tinyproxy), proxy restarted`);
  phases.push(phase);
  const tokensBefore = issued().length;
  const sampler = setInterval(() => {
    if (child.exited) return;
    phase.maxRss = Math.max(phase.maxRss, procStatusBytes(child.pid, 'VmRSS'));
    phase.maxFds = Math.max(phase.maxFds, fdCount(child.pid));
  }, 1000);
  mix = () => 'normal';
  const stop = startLoad(`http://127.0.0.1:${proxyPort}`, CONCURRENCY, PACED_RATE);
  await sleep(PLAN.g.seconds * 400);
  const downAt = Date.now();
  await proxy.stop();
  await proxy.start();
  const upAt = Date.now();
  await sleep(PLAN.g.seconds * 600);
  await stop();
  clearInterval(sampler);
  phase.stopSoakLag();
  for (const r of standin.apiRequests.splice(0)) if (r.status === 401) phase.upstream401++;
  phase.renewals = issued().length - tokensBefore;
  const outputs = [
    readFileSync(logFile, 'utf8'),
    await (await request(`${admin}/status`)).body.text(),
    await (await request(`${admin}/metrics`)).body.text(),
  ];
  await child.stop();

  const allowedUntil = upAt + RECOVERY_SLACK_MS;
  const outside = phase.failedAt.filter((at) => at < downAt || at > allowedUntil).length;
  only(
    phase,
    (k) =>
      /^normal:2\d\d$/.test(k) ||
      k === 'normal:502 upstream_unreachable' ||
      k.startsWith('normal:503 token_unavailable'),
  );
  check(outside === 0, `g: ${outside} failed answers outside the proxy's restart window`);
  check(phase.renewals >= 2, `g: ${phase.renewals} renewals through the proxy (want ≥ 2)`);
  const tunnels = new Set(proxy.tunnels());
  for (const host of targets) check(tunnels.has(host), `g: no CONNECT ${host} in the proxy's log`);
  check(
    outputs.every((text) => !text.includes(password)),
    "g: the proxy's password in the sidecar's log, /status or /metrics",
  );
  phase.notes.push(
    `proxy down +${downAt - phase.start} ms, up again +${upAt - phase.start} ms; ` +
      `${phase.failedAt.length} failed answers, ${outside} outside the window to +${allowedUntil - phase.start} ms; ` +
      `${proxy.tunnels().length} tunnels (CONNECT) in the proxy's log`,
  );
  phase.sidecarLagMs = 0;
}

/** Check that every outcome of phase `p` is `allowed`; name each one that is not. */
function only(p, allowed) {
  for (const [key, n] of p.byOutcome) {
    if (!allowed(key)) {
      const when = p.timings.get(key);
      check(false, `${p.name}: ${n} × ${key}${when ? ` — first at ${when.join(', ')}` : ''}`);
    }
  }
}

/**
 * Phases a-d: one sidecar (started with the inspector, for the forced GC), a warm-up, a memory
 * baseline, the four phases, memory again. Returns the two memory snapshots.
 */
async function singleSidecarPhases(pki, front, frontUrl) {
  const [proxyPort, adminPort] = await freePorts(2);
  const logFile = join(work, 'sidecar.log');
  const flags = args['sidecar-flags'].split(/\s+/).filter(Boolean);
  const sidecar = startChild(
    args.node,
    [...flags, '--inspect=127.0.0.1:0', join(ROOT, 'dist', 'main.js')],
    {
      env: soakEnv(pki, frontUrl, proxyPort, adminPort),
      logFile,
    },
  );
  cleanups.push(() => sidecar.stop());
  const admin = `http://127.0.0.1:${adminPort}`;
  await waitForStatus(`${admin}/readyz`, { isAlive: () => !sidecar.exited, timeoutMs: 20000 });
  const inspectorUrl = /ws:\/\/127\.0\.0\.1:\d+\/[\w-]+/.exec(readFileSync(logFile, 'utf8'))?.[0];
  if (!inspectorUrl) throw new Error('no inspector URL in the sidecar output');
  const origin = `http://127.0.0.1:${proxyPort}`;
  const pid = sidecar.pid;

  // Per-second bookkeeping: drain the stand-in's API log (it keeps every request in memory),
  // sample RSS and fds, notice a crash at once.
  const ticker = setInterval(() => {
    for (const r of standin.apiRequests.splice(0)) if (r.status === 401) phase.upstream401++;
    if (sidecar.exited) return;
    phase.maxRss = Math.max(phase.maxRss, procStatusBytes(pid, 'VmRSS'));
    phase.maxFds = Math.max(phase.maxFds, fdCount(pid));
  }, 1000);
  cleanups.push(() => clearInterval(ticker));

  const runPhase = async (name, seconds, setup = () => {}, mixFn = () => 'normal') => {
    phase = phaseStats(name);
    phases.push(phase);
    const tokensBefore = issued().length;
    const beforeMetrics = await scrape(admin);
    const unauthorizedBefore = metricSum(
      beforeMetrics,
      'oauth_sidecar_upstream_unauthorized_total',
    );
    const unreplayedBefore = metricSum(beforeMetrics, 'oauth_sidecar_upstream_unauthorized_total', {
      replayed: 'false',
    });
    mix = mixFn;
    await setup();
    const stop = startLoad(origin, CONCURRENCY + (mixFn === normalOnly ? 0 : 2));
    if (typeof seconds === 'function') await seconds();
    else await sleep(seconds * 1000);
    await stop();
    for (const r of standin.apiRequests.splice(0)) if (r.status === 401) phase.upstream401++;
    phase.renewals = issued().length - tokensBefore;
    const after = await scrape(admin);
    phase.unauthorizedMetric =
      metricSum(after, 'oauth_sidecar_upstream_unauthorized_total') - unauthorizedBefore;
    phase.unreplayed401 =
      metricSum(after, 'oauth_sidecar_upstream_unauthorized_total', { replayed: 'false' }) -
      unreplayedBefore;
    // Longest event-loop stall in the phase: the sidecar's (prom-client resets it per scrape) and
    // this process's, which hosts the stand-in, the token front and the load generator.
    phase.sidecarLagMs = metricSum(after, 'oauth_sidecar_nodejs_eventloop_lag_max_seconds') * 1000;
    phase.stopSoakLag();
    check(!sidecar.exited, `${name}: the sidecar exited`);
    return phase;
  };
  const normalOnly = () => 'normal';
  // The abusive workers take the four kinds in turn, the second one half a turn later, so a short
  // phase exercises each (a random pick left phase d of a CI run with no reset, P ≈ 0.2).
  const ABUSES = ['reset', 'slow', 'abort-slow', 'abort-body'];
  const abuseTurns = new Map();
  const abusive = (i) => {
    if (i < CONCURRENCY) return 'normal';
    const turn = abuseTurns.get(i) ?? (i - CONCURRENCY) * 2;
    abuseTurns.set(i, turn + 1);
    return ABUSES[turn % ABUSES.length];
  };
  // Warm-up: the whole mix (big bodies and aborts included) long enough for RSS to reach its
  // working size, then the baseline.
  // Time alone is not enough on a VM that stalls: also wait for enough requests (capped at 40 s).
  const warmUpUntil = Date.now() + (CI ? 8 : 20) * 1000;
  await runPhase(
    'warm-up',
    async () => {
      while (
        Date.now() < warmUpUntil ||
        (phase.requests < 5000 && Date.now() < warmUpUntil + 32_000)
      )
        await sleep(100);
    },
    () => {},
    abusive,
  );
  const before = await snapshot(pid, admin, inspectorUrl);

  const a = await runPhase('a sustained, short tokens', PLAN.a.seconds);
  check(
    a.renewals >= PLAN.a.minRenewals,
    `a: ${a.renewals} renewals (want ≥ ${PLAN.a.minRenewals})`,
  );
  only(a, (k) => /^normal:2\d\d$/.test(k));
  check(a.excused503 === 0, `a: ${a.excused503} × 503 token_unavailable`);
  check(
    a.upstream401 === 0 && a.unauthorizedMetric === 0,
    `a: upstream 401s (${a.upstream401}, metric ${a.unauthorizedMetric})`,
  );

  const b = await runPhase('b token endpoint 50% 503, 2 s', PLAN.b.seconds, () => {
    setLifetime(PLAN.b.lifetime);
    front.delayMs = PLAN.b.delayMs;
    standin.failTokenRequestsRandomly({ kind: 'status', status: 503 }, PLAN.b.failRatio);
  });
  standin.clearTokenFaults();
  front.delayMs = 0;
  only(b, (k) => /^normal:2\d\d$/.test(k) || k.includes('(no valid token)'));
  // Renewals fail here, so tokens run to their expiry, and a request sent in a token's last
  // milliseconds can reach the API just after it (a stall is enough). The sidecar must replay it:
  // no 401 may reach a client (the outcome check above) and none may go unreplayed.
  check(b.unreplayed401 === 0, `b: ${b.unreplayed401} upstream 401s not replayed`);
  if (b.upstream401) b.notes.push(`${b.upstream401} upstream 401, all replayed`);
  b.notes.push(`${b.excused503} × 503 while no token was valid`);

  // c: short tokens, then the endpoint goes down until well past expiry.
  setLifetime(PLAN.c.lifetime);
  const since = Date.now();
  while (!issued().some((r) => r.at >= since)) await sleep(100);
  const lastToken = issued().pop();
  const expiry = lastToken.at + PLAN.c.lifetime * 1000;
  let downAt;
  let upAt;
  const outageInfo = { attemptsWhileDown: 0, stepEnd: 0 };
  let recovered;
  const recoveredOrLate = new Promise((resolve) => (recovered = resolve));
  const c = await runPhase(
    'c token endpoint down past expiry',
    async () => {
      await recoveredOrLate;
      // After the endpoint is back: wait for the first 200, or one backoff step + 1.5 s.
      const deadline = Math.max(outageInfo.stepEnd, upAt) + RECOVERY_SLACK_MS;
      while (!firstOkAfter.at && Date.now() < deadline) await sleep(50);
      await sleep(1000); // and some 200s after it
    },
    () => {
      downAt = Date.now();
      standin.failTokenRequests({ kind: 'status', status: 503 }, Infinity);
      const callsBefore = front.calls;
      retryAfterSeen = [];
      setTimeout(
        () => {
          void (async () => {
            upAt = Date.now();
            outageInfo.attemptsWhileDown = front.calls - callsBefore;
            firstOkAfter = { since: upAt };
            standin.clearTokenFaults();
            // "One backoff step": the keeper's next scheduled attempt, read from /status once no
            // attempt is in flight (one sent before the endpoint came back still fails and
            // schedules the next step).
            for (let i = 0; i < 100 && !firstOkAfter.at; i++) {
              const status = await request(`${admin}/status`);
              const next = (await status.body.json()).token?.nextRenewalAt;
              if (next) {
                outageInfo.stepEnd = Date.parse(next);
                break;
              }
              await sleep(100);
            }
            recovered();
          })();
        },
        Math.max(0, expiry - Date.now()) + PLAN.c.outageSeconds * 1000,
      );
    },
  );
  Object.assign(c, outageInfo);
  only(c, (k) => /^normal:2\d\d$/.test(k) || k.includes('(no valid token)'));
  const outage = (upAt - downAt) / 1000;
  check(
    c.excused503 > 0,
    'c: no 503 token_unavailable while the token endpoint was down past expiry',
  );
  check(
    c.attemptsWhileDown <= outage + 3,
    `c: ${c.attemptsWhileDown} token attempts in ${outage.toFixed(1)} s of outage (backoff not honoured?)`,
  );
  const recovery = firstOkAfter?.at ? (firstOkAfter.at - upAt) / 1000 : Infinity;
  const step = Math.max(0, (c.stepEnd - upAt) / 1000);
  const tokenBack = issued().find((r) => r.at >= upAt);
  c.notes.push(
    `after recovery: next attempt scheduled +${c.stepEnd ? c.stepEnd - upAt : '?'} ms, token issued +${tokenBack ? tokenBack.at - upAt : '?'} ms, first 200 +${firstOkAfter?.at ? firstOkAfter.at - upAt : '?'} ms`,
  );
  check(
    recovery <= step + RECOVERY_SLACK_MS / 1000,
    `c: first 200 ${recovery.toFixed(1)} s after the endpoint came back (next scheduled attempt was ${step.toFixed(1)} s away)`,
  );
  c.notes.push(
    `endpoint down +${downAt - c.start} ms to +${upAt - c.start} ms, last token's expiry +${expiry - c.start} ms; ` +
      `${c.attemptsWhileDown} token attempts in ${outage.toFixed(0)} s down; 200 again ${recovery.toFixed(1)} s after recovery (next attempt was scheduled ${step.toFixed(1)} s ahead)`,
  );
  setLifetime(PLAN.a.lifetime);

  const d = await runPhase(
    'd upstream resets, timeouts, clients leaving',
    PLAN.d.seconds,
    () => {},
    abusive,
  );
  only(
    d,
    (k) =>
      /^normal:2\d\d$/.test(k) ||
      k === 'reset:502 upstream_unreachable' ||
      k === 'slow:504 upstream_timeout' ||
      /^abort-(slow|body):left$/.test(k),
  );
  check(d.byOutcome.get('reset:502 upstream_unreachable') > 0, 'd: no reset was exercised');
  check(d.byOutcome.get('slow:504 upstream_timeout') > 0, 'd: no timeout was exercised');

  const after = await snapshot(pid, admin, inspectorUrl);
  check(
    after.rss <= before.rss * 1.1,
    `memory: RSS ${fmt.mib(before.rss)} → ${fmt.mib(after.rss)} (> +10%)`,
  );
  check(
    // V8's heap after a full GC moves by a MiB or two with code compiled late; a leak moves more.
    after.heapUsed <= Math.max(before.heapUsed * 1.1, before.heapUsed + 2 * 1024 * 1024),
    `memory: V8 heap used ${fmt.mib(before.heapUsed)} → ${fmt.mib(after.heapUsed)} (> +10% and > +2 MiB)`,
  );
  check(after.fds <= before.fds + 5, `fds: ${before.fds} → ${after.fds}`);
  check(
    after.handles <= before.handles + 5,
    `active handles: ${before.handles} → ${after.handles}`,
  );
  const health = await request(`${admin}/healthz`);
  await health.body.dump();
  check(health.statusCode === 200 && !sidecar.exited, 'the sidecar is not healthy at the end');

  // The fleet uses the same client and stand-in when it runs in this process: stop the single
  // sidecar so every grant counted from here on is the fleet's.
  await sidecar.stop();
  return { before, after };
}

/** The groups of phases one process can run (`--phases`): a-d share one sidecar. */
const GROUPS = ['a-d', 'e', 'f', 'g', 'h'];
/**
 * `--ci` runs these lanes side by side, each a process of its own with its own stand-in, token
 * front, sidecars, Redis and proxy (docs/testing.md "Soak"), its groups in this order. a-d and f
 * load their sidecars as fast as the connections go, f beside the warm-up and a (b and c, which
 * judge waits against the clock with the least slack, have only paced load beside them); e, g
 * and h at PACED_RATE.
 */
const LANES = [['a-d'], ['f', 'e'], ['g', 'h']];

async function main(groups) {
  const started = Date.now();
  const pki = makePki(work);
  const { startStandin } = await import(join(ROOT, 'dist', 'standin', 'index.js'));
  standin = await startStandin({
    clientId: 'soak-client',
    clientSecret: 'soak-secret',
    tokenLifetimeSeconds: PLAN.a.lifetime,
    pki: { caCert: pki.caCert, serverCert: pki.serverCert, serverKey: pki.serverKey },
  });
  cleanups.push(() => standin.close());
  const { front, url: frontUrl } = await startTokenFront(pki, standin.url);

  let memory;
  /** Each group of phases, run in the order `groups` names them. */
  const runners = {
    'a-d': async () => {
      memory = await singleSidecarPhases(pki, front, frontUrl);
    },
    e: () =>
      fleetPhase(pki, frontUrl, async (members) => {
        phase = phaseStats(
          `e fleet of ${PLAN.e.processes} sharing Redis, endpoint ${Math.round(PLAN.e.failRatio * 100)}% 503`,
        );
        phases.push(phase);
        const tokensBefore = issued().length;
        setLifetime(PLAN.e.lifetime);
        standin.failTokenRequestsRandomly({ kind: 'status', status: 503 }, PLAN.e.failRatio);
        mix = () => 'normal';
        const per = Math.max(1, Math.floor(CONCURRENCY / members.length));
        const rate = PACED_RATE && PACED_RATE / members.length;
        const stops = members.map((m) => startLoad(m.origin, per, rate));
        await sleep(PLAN.e.seconds * 1000);
        await Promise.all(stops.map((stop) => stop()));
        standin.clearTokenFaults();
        for (const r of standin.apiRequests.splice(0)) if (r.status === 401) phase.upstream401++;
        phase.renewals = issued().length - tokensBefore;
        // Not measured for the fleet's sidecars (three processes); the table shows 0.
        phase.sidecarLagMs = 0;
        phase.stopSoakLag();
        return phase;
      }),
    f: () => distrustPhase(pki, front, frontUrl),
    g: () => egressPhase(pki, frontUrl),
    h: () =>
      clusterPhase({
        work,
        cleanups,
        concurrency: CONCURRENCY,
        loadSeconds: PLAN.h.loadSeconds,
        startMembers: async (name, count, extra) => {
          const members = await startFleet(pki, frontUrl, name, count, extra);
          await fleetReady(members);
          return members;
        },
        begin: (name) => {
          phase = phaseStats(name);
          phases.push(phase);
          mix = () => 'normal';
          return phase;
        },
        startLoad,
        rate: PACED_RATE,
        check,
        only,
        grants: () => issued().length,
        watch: (p, children) => {
          const sampler = setInterval(() => {
            for (const child of children.filter((c) => !c.exited)) {
              p.maxRss = Math.max(p.maxRss, procStatusBytes(child.pid, 'VmRSS'));
              p.maxFds = Math.max(p.maxFds, fdCount(child.pid));
            }
          }, 1000);
          return () => clearInterval(sampler);
        },
      }),
  };
  for (const group of groups) {
    setLifetime(PLAN.a.lifetime);
    await runners[group]();
  }

  say();
  say(
    `| phase | requests | outcomes | renewals | upstream 401 | max RSS | max fds | longest stall: sidecar / soak |`,
  );
  say(`|---|---:|---|---:|---:|---:|---:|---:|`);
  for (const p of phases) {
    const outcomes = [...p.byOutcome].map(([k, n]) => `${k} ×${n}`).join('; ');
    say(
      `| ${p.name} | ${p.requests} | ${outcomes} | ${p.renewals} | ${p.upstream401} | ${fmt.mib(p.maxRss)} | ${p.maxFds} | ${Math.round(p.sidecarLagMs)} / ${Math.round(p.soakLagMs)} ms |`,
    );
  }
  for (const p of phases)
    for (const note of [...p.notes, ...p.samples]) say(`- ${p.name}: ${note}`);
  if (memory) {
    const { before, after } = memory;
    say(
      `- after forced GC, settled: RSS ${fmt.mib(before.rss)} → ${fmt.mib(after.rss)}, heap used ${fmt.mib(before.heapUsed)} → ${fmt.mib(after.heapUsed)}, fds ${before.fds} → ${after.fds}, active handles ${before.handles} → ${after.handles}`,
    );
  }
  say(
    `- node ${args.node === process.execPath ? process.version : args.node}, ${((Date.now() - started) / 1000).toFixed(0)} s total${CI ? ' (--ci)' : ''}, phases ${groups.join(', ')}`,
  );
  say();
  if (violations.length) {
    say(`FAIL (${violations.length}):`);
    for (const v of violations) say(`  - ${v}`);
  } else say('PASS');
}

/** One lane: this script with `--phases`, its output kept for when every lane has ended. */
function runLane(groups) {
  const argv = [
    fileURLToPath(import.meta.url),
    '--ci',
    `--phases=${groups.join(',')}`,
    `--node=${args.node}`,
    `--concurrency=${args.concurrency}`,
    `--sidecar-flags=${args['sidecar-flags']}`,
    ...(args.keep ? ['--keep'] : []),
  ];
  const started = Date.now();
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  cleanups.push(() => child.exitCode === null && child.signalCode === null && child.kill());
  return new Promise((resolve) =>
    child.once('close', (code, signal) =>
      resolve({ groups, code: code ?? signal, output, seconds: (Date.now() - started) / 1000 }),
    ),
  );
}

/** `--ci`: the lanes side by side; each lane's output printed when all have ended. */
async function lanes() {
  const started = Date.now();
  const results = await Promise.all(LANES.map(runLane));
  for (const r of results) {
    say(
      `--- phases ${r.groups.join(', ')}: ${r.code === 0 ? 'PASS' : `FAIL (exit ${r.code})`}, ${r.seconds.toFixed(0)} s`,
    );
    process.stdout.write(r.output);
  }
  const failed = results.filter((r) => r.code !== 0);
  say(
    `soak --ci: ${LANES.length} lanes side by side, ${((Date.now() - started) / 1000).toFixed(0)} s; ` +
      (failed.length ? `FAIL (${failed.map((r) => r.groups.join(', ')).join('; ')})` : 'PASS'),
  );
  return failed.length ? 1 : 0;
}

const groups = args.phases?.split(',') ?? GROUPS;
const unknown = groups.filter((g) => !GROUPS.includes(g));
if (unknown.length) {
  console.error(`soak: unknown --phases ${unknown.join(', ')} (known: ${GROUPS.join(', ')})`);
  process.exit(2);
}
await runScript(
  'soak',
  async () => {
    if (CI && args.phases === undefined) return lanes();
    await main(groups);
    return violations.length ? 1 : 0;
  },
  { cleanups, work, keep: args.keep },
);
