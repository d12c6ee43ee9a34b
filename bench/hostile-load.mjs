// The hostile-load figures: how long other clients wait while one client floods, storms or reads
// slowly, what the process's memory does under floods meant to grow it, and how fair share splits
// the API's rate (docs/benchmarks.md "Floods and storms" and "Fair share"). The suite keeps the
// behaviour of each at a small scale (test/flood.test.ts, slow-*.test.ts, cache-memory.test.ts,
// fair-share.test.ts); the latencies, ratios, counts and memory at full scale are measured here,
// one scenario at a time, against the built bundle with the image's runtime settings.
//
//   node bench/hostile-load.mjs                 # every scenario, figures and bounds
//   node bench/hostile-load.mjs --only=flood    # one scenario (flood, h2-storm, slow-storm,
//                                               # trickle, readers, cache, fair-share)
//   node bench/hostile-load.mjs --no-bounds     # print only; exit 0 whatever the figures
//
// The bounds are CI's: a loaded 2-core machine running nothing else at the time (.ci/run runs
// this once, after the suite). Exit 1 when a figure is out of its bound.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect as connectH2, constants as h2 } from 'node:http2';
import { connect } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, Pool, request } from 'undici';
import { ROOT, importTypeScript, makeWorkDir, percentile, runScript, say } from './lib.mjs';
import { dockerEntrypointFlags, shippedEnv } from './shipped-runtime.mjs';

const args = process.argv.slice(2);
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length);
const bounded = !args.includes('--no-bounds');
const NODE_MAJOR = Number(process.versions.node.split('.')[0]);
const MIB = 1024 * 1024;
/** Normal GETs beside an attack, one every 500 ms; at least 90 % answered 200 within 2 s. */
const PROBES = 20;
const PROBES_GOOD = 18;

const work = makeWorkDir('oauth-sidecar-hostile-');
const cleanups = [];
const failures = [];

/** Print a figure and check it against its bound (`ok` false: out of bound). */
function figure(name, value, bound, ok) {
  const mark = ok ? 'ok  ' : 'OUT ';
  say(`  ${bounded ? mark : ''}${name}: ${value}${bound ? ` (bound ${bound})` : ''}`);
  if (!ok) failures.push(`${name}: ${value} (bound ${bound})`);
}

function rssBytes(pid) {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

async function until(fn, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await fn()) return;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The bundle with `env`, ready (holds a token); its stdout lines kept. Needs LOG_LEVEL info or lower: the "listening" line gives its ports. */
async function sidecar(env, nodeFlags = []) {
  const child = spawn(process.execPath, [...nodeFlags, join(ROOT, 'dist', 'main.js')], {
    env: {
      PATH: process.env.PATH ?? '',
      PROXY_LISTEN: '127.0.0.1:0',
      ADMIN_LISTEN: '127.0.0.1:0',
      LOG_LEVEL: 'info',
      ...env,
    },
  });
  const stdout = [];
  let partial = '';
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal)),
  );
  const listening = new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      const lines = (partial + d.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        stdout.push(line);
        if (line.includes('oauth-sidecar listening')) resolve(JSON.parse(line));
      }
    });
    child.stderr.resume();
    void exited.then((code) => reject(new Error(`sidecar exited (${code}) before listening`)));
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    return exited;
  };
  cleanups.push(stop);
  const { proxy, admin } = await listening;
  const s = { child, stdout, proxyUrl: `http://${proxy}`, adminUrl: `http://${admin}`, stop };
  await until(
    async () => (await request(`${s.adminUrl}/readyz`)).statusCode === 200,
    15_000,
    'readyz',
  );
  return s;
}

async function inFlight(s) {
  const res = await request(`${s.adminUrl}/metrics`, { headersTimeout: 5_000 });
  return Number(/\noauth_sidecar_requests_in_flight (\d+)\n/.exec(await res.body.text())?.[1]);
}

/** One GET on an h2 session: its status, 0 when none came within `timeoutMs`. */
function h2Status(session, path, timeoutMs = 30_000) {
  const stream = session.request({ ':path': path });
  stream.on('error', () => undefined);
  stream.resume();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      stream.close(h2.NGHTTP2_CANCEL);
      resolve(0);
    }, timeoutMs);
    stream.once('response', (headers) => {
      clearTimeout(timer);
      resolve(Number(headers[':status']));
    });
  });
}

/** `count` GETs, one every 500 ms, each given 5 s: how many were answered 200 within 2 s. */
async function pacedGets(proxyUrl, count) {
  const agent = new Agent({ connections: 64 });
  const results = [];
  const pending = [];
  for (let i = 0; i < count; i++) {
    const started = Date.now();
    pending.push(
      request(`${proxyUrl}/v1.0/normal/${i}`, {
        dispatcher: agent,
        headersTimeout: 5_000,
        bodyTimeout: 5_000,
      }).then(
        async (res) => {
          await res.body.text();
          results.push({ status: res.statusCode, ms: Date.now() - started });
        },
        () => void results.push({ status: 0, ms: Date.now() - started }),
      ),
    );
    await sleep(500);
  }
  await Promise.all(pending);
  await agent.close();
  return { results, good: results.filter((r) => r.status === 200 && r.ms < 2_000).length };
}

/** /metrics and another client's GET, each timed. */
async function probe(s, other) {
  let started = Date.now();
  const metrics = await request(`${s.adminUrl}/metrics`, { headersTimeout: 10_000 });
  await metrics.body.text();
  const metricsMs = Date.now() - started;
  started = Date.now();
  const status = await other();
  return { metricsMs, otherMs: Date.now() - started, status };
}

const h1Other = (s) => async () => {
  const res = await request(`${s.proxyUrl}/v1.0/other`, { headersTimeout: 10_000 });
  await res.body.text();
  return res.statusCode;
};

const h2Other = (s) => async () => {
  const session = connectH2(s.proxyUrl);
  session.on('error', () => undefined);
  try {
    return await h2Status(session, '/v1.0/other');
  } finally {
    session.close();
  }
};

/** Open 200 h2 sessions × 100 streams to `prefix/<n>/<i>`, each HEADERS followed by RST_STREAM. */
async function resetStorm(s, prefix) {
  const sessions = [];
  for (let n = 0; n < 200; n++) {
    const storm = connectH2(s.proxyUrl);
    storm.on('error', () => undefined);
    sessions.push(storm);
    await new Promise((resolve) => storm.once('remoteSettings', resolve));
    for (let i = 0; i < 100; i++) {
      const stream = storm.request({ ':path': `${prefix}/${n}/${i}` });
      stream.on('error', () => undefined);
      stream.close(h2.NGHTTP2_CANCEL);
    }
  }
  return sessions;
}

const MAX_CONNECTIONS = 16;
const container = { ...shippedEnv() };
const containerFlags = dockerEntrypointFlags();

/** Bundled TypeScript goes beside the packages it imports (resolved from node_modules). */
const BUNDLES = join(ROOT, 'node_modules', '.cache', 'hostile-load');

async function limitsFixture(answer) {
  mkdirSync(BUNDLES, { recursive: true });
  const { createTestPki, startStandin } = await importTypeScript('src/standin/index.ts', BUNDLES);
  const { startCountingUpstream } = await importTypeScript('test/helpers/upstream.ts', BUNDLES);
  const pki = await createTestPki();
  const standin = await startStandin({ pki, clientId: 'hostile', clientSecret: 'hostile-secret' });
  cleanups.push(() => standin.close());
  const upstream = await startCountingUpstream(pki, answer);
  cleanups.push(() => upstream.close());
  const caFile = join(work, 'ca.pem');
  writeFileSync(caFile, pki.caCert);
  return {
    standin,
    upstream,
    env: {
      UPSTREAM_BASE_URL: upstream.url,
      TOKEN_URL: `${standin.url}/oauth/token/`,
      UPSTREAM_CA_FILE: caFile,
      CLIENT_ID: 'hostile',
      CLIENT_SECRET: 'hostile-secret',
      UPSTREAM_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
    },
  };
}

const BIG = Buffer.alloc(MIB, 'x');
const SLOW_MS = 3_000;
const counts = { slow: 0, big: 0 };

function answer(req, res, done) {
  req.resume();
  const reply = () => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url }));
    done();
  };
  if (req.url?.startsWith('/v1.0/big/')) {
    counts.big += 1;
    res.once('close', done);
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end(BIG);
  } else if (req.url?.startsWith('/v1.0/slow/')) {
    counts.slow += 1;
    setTimeout(reply, SLOW_MS);
  } else if (req.url?.startsWith('/v1.0/reset/')) setTimeout(reply, 5);
  else if (req.url?.startsWith('/v1.0/cached/')) {
    // Small JSON answers for the cache; `?vary=1` answers `Vary: X-Pad`.
    const body = JSON.stringify({ url: req.url, data: 'x'.repeat(200) });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...(req.url.includes('vary=1') ? { vary: 'X-Pad' } : {}),
    });
    res.end(body);
    done();
  } else reply();
}

/** `count` GETs through `pool`, 32 at a time; the statuses other than 200. */
async function poolFlood(pool, count, options) {
  let next = 0;
  const failed = [];
  const worker = async () => {
    while (next < count) {
      const res = await pool.request(options(next++));
      await res.body.dump();
      if (res.statusCode !== 200) failed.push(res.statusCode);
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
  return failed;
}

const scenarios = {
  /** One connection pipelining 20,000 GETs: /metrics and other clients answered meanwhile. */
  async flood(fx) {
    const s = await sidecar({ ...container, ...fx.env }, containerFlags);
    const connectionsBefore = fx.upstream.connections;
    const socket = connect(Number(new URL(s.proxyUrl).port), '127.0.0.1');
    socket.on('error', () => undefined);
    let answers = 0;
    let tail = '';
    socket.on('data', (chunk) => {
      const text = tail + chunk.toString('latin1');
      answers += text.split('HTTP/1.1 200 ').length - 1;
      tail = text.slice(-16);
    });
    socket.write('GET /v1.0/flood HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(20_000));
    let peak = 0;
    const probes = [];
    while (answers < 20_000 && s.child.exitCode === null) {
      peak = Math.max(peak, rssBytes(s.child.pid));
      probes.push(await probe(s, h1Other(s)));
      await sleep(10);
    }
    socket.destroy();
    const slowestMetrics = Math.max(...probes.map((p) => p.metricsMs));
    const slowestOther = Math.max(...probes.map((p) => p.otherMs));
    figure(
      'flood: slowest /metrics during it',
      `${slowestMetrics} ms`,
      '< 2,000 ms',
      slowestMetrics < 2_000,
    );
    figure(
      'flood: slowest other client during it',
      `${slowestOther} ms`,
      '< 2,000 ms',
      slowestOther < 2_000,
    );
    figure('flood: peak RSS', `${(peak / MIB).toFixed(0)} MiB`, '< 250 MiB', peak < 250 * MIB);
    const conns = fx.upstream.connections - connectionsBefore;
    figure('flood: upstream connections', conns, `<= ${MAX_CONNECTIONS}`, conns <= MAX_CONNECTIONS);
    await s.stop();
  },

  /** 20,000 h2 streams opened and reset at once, fast path. */
  async 'h2-storm'(fx) {
    const s = await sidecar({ ...container, ...fx.env, PROXY_HTTP2: 'true' }, containerFlags);
    const before = fx.upstream.requests;
    let peak = rssBytes(s.child.pid);
    const watch = setInterval(() => (peak = Math.max(peak, rssBytes(s.child.pid))), 50);
    const during = [];
    let storming = true;
    const prober = (async () => {
      while (storming) during.push(await probe(s, h2Other(s)));
    })();
    const sessions = await resetStorm(s, '/v1.0/reset');
    await until(async () => (await inFlight(s)) === 0, 90_000, 'the storm wound up');
    clearInterval(watch);
    storming = false;
    await prober;
    const forwarded = fx.upstream.requests - before - during.length;
    for (const storm of sessions) storm.destroy();
    const slowestOther = Math.max(...during.map((d) => d.otherMs));
    const slowestMetrics = Math.max(...during.map((d) => d.metricsMs));
    // Node 24 is the container's runtime; Node 20 is slower at this storm.
    const otherBound = NODE_MAJOR >= 24 ? 2_000 : 8_000;
    const forwardedBound = NODE_MAJOR >= 24 ? 4_000 : 6_000;
    figure(
      'h2 storm: slowest /metrics during it',
      `${slowestMetrics} ms`,
      '< 2,000 ms',
      slowestMetrics < 2_000,
    );
    figure(
      'h2 storm: slowest other client during it',
      `${slowestOther} ms`,
      `< ${otherBound} ms`,
      slowestOther < otherBound,
    );
    figure('h2 storm: peak RSS', `${(peak / MIB).toFixed(0)} MiB`, '< 250 MiB', peak < 250 * MIB);
    figure(
      'h2 storm: reset streams that reached the upstream',
      `${forwarded} of 20,000`,
      `<= ${forwardedBound}`,
      forwarded <= forwardedBound,
    );
    await s.stop();
  },

  /** 20,000 reset h2 streams to a 3 s path: slots back at once, few sent upstream. */
  async 'slow-storm'(fx) {
    const s = await sidecar({ ...fx.env, PROXY_HTTP2: 'true' });
    const before = counts.slow;
    const sessions = await resetStorm(s, '/v1.0/slow');
    const ended = Date.now();
    const gaugeWatch = (async () => {
      while ((await inFlight(s)) > 64 && Date.now() - ended < 10_000) await sleep(50);
      return Date.now() - ended;
    })();
    const session = connectH2(s.proxyUrl);
    session.on('error', () => undefined);
    const status = await h2Status(session, '/v1.0/after-the-storm', 10_000);
    const answeredMs = Date.now() - ended;
    const gaugeMs = await gaugeWatch;
    await until(async () => (await inFlight(s)) === 0, 15_000, 'in flight 0');
    await sleep(SLOW_MS + 500);
    const reached = counts.slow - before;
    session.destroy();
    for (const storm of sessions) storm.destroy();
    figure(
      'slow storm: GET after it',
      `${status} in ${answeredMs} ms`,
      '200 in < 2,000 ms',
      status === 200 && answeredMs < 2_000,
    );
    figure('slow storm: in flight <= 64 after', `${gaugeMs} ms`, '< 3,000 ms', gaugeMs < 3_000);
    figure(
      'slow storm: reset streams that reached the upstream',
      `${reached} of 20,000`,
      '<= 1,000',
      reached <= 1_000,
    );
    await s.stop();
  },

  /** 1,000 connections trickling request bodies, 10 bytes every 4 s. */
  async trickle(fx) {
    const s = await sidecar(fx.env);
    const port = Number(new URL(s.proxyUrl).port);
    const sockets = new Set();
    let tooSlow = 0;
    let stopping = false;
    const open = () => {
      if (stopping) return;
      const socket = connect(port, '127.0.0.1');
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('data', (chunk) => {
        if (chunk.toString('latin1').startsWith('HTTP/1.1 408 ')) tooSlow += 1;
      });
      socket.once('close', () => sockets.delete(socket));
      socket.write(
        'POST /v1.0/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n0123456789',
      );
    };
    for (let i = 0; i < 1_000; i++) open();
    const trickle = setInterval(() => {
      for (const socket of sockets) socket.write('0123456789');
      for (let i = sockets.size; i < 1_000; i++) open();
    }, 4_000);
    try {
      await until(async () => (await inFlight(s)) >= 200, 20_000, '200 trickling bodies in flight');
      const { good } = await pacedGets(s.proxyUrl, PROBES);
      figure(
        'trickling bodies: GETs answered 200 within 2 s',
        `${good} of ${PROBES}`,
        `>= ${PROBES_GOOD}`,
        good >= PROBES_GOOD,
      );
      figure('trickling bodies: cut off with 408', tooSlow, '> 0', tooSlow > 0);
    } finally {
      stopping = true;
      clearInterval(trickle);
      for (const socket of sockets) socket.destroy();
    }
    await s.stop();
  },

  /** slowhttptest -X: 1,000 slow readers of a 1 MB answer. */
  async readers(fx) {
    const s = await sidecar({ ...container, ...fx.env }, containerFlags);
    const attack = spawn(
      'slowhttptest',
      [
        ...['-c', '1000', '-X', '-r', '200', '-w', '512', '-y', '1024', '-n', '5', '-z', '32'],
        ...['-k', '3', '-l', '40', '-u', `${s.proxyUrl}/v1.0/big/file`],
      ],
      { stdio: 'ignore' },
    );
    cleanups.push(() => attack.kill('SIGKILL'));
    const before = counts.big;
    await until(() => counts.big - before >= 100, 15_000, '100 slow readers answered');
    let maxRss = rssBytes(s.child.pid);
    const watch = setInterval(() => (maxRss = Math.max(maxRss, rssBytes(s.child.pid))), 250);
    const { good } = await pacedGets(s.proxyUrl, PROBES).finally(() => clearInterval(watch));
    attack.kill('SIGKILL');
    const attackRequests = counts.big - before;
    const cut = s.stdout.filter((line) => line.includes('"result":"client_too_slow"')).length;
    figure(
      'slow readers: GETs answered 200 within 2 s',
      `${good} of ${PROBES}`,
      `>= ${PROBES_GOOD}`,
      good >= PROBES_GOOD,
    );
    figure(
      'slow readers: max RSS',
      `${(maxRss / MIB).toFixed(0)} MiB`,
      '< 250 MiB',
      maxRss < 250 * MIB,
    );
    figure('slow readers: cut as client_too_slow', cut, '> 0', cut > 0);
    figure(
      'slow readers: attack requests upstream',
      attackRequests,
      '< 1,500',
      attackRequests < 1_500,
    );
    await s.stop('SIGKILL');
  },

  /**
   * Floods meant to grow the response cache: 20,000 distinct keys into the default cache, 3,000
   * `Vary` variants carrying 12 KB request values into a 4 MiB one. RSS over the warmed-up
   * baseline may grow by at most `cache.maxBytes` + 10 % + a slack (docs/response-cache.md
   * "Memory": a flood's own data stays in RSS on Node 24).
   */
  async cache(fx) {
    const grow = async (env, count, options) => {
      const s = await sidecar(
        { ...container, ...fx.env, CACHE_RULES: '/v1.0/cached/=300', ...env },
        containerFlags,
      );
      const pool = new Pool(s.proxyUrl, { connections: 32 });
      try {
        // Warm: the connections, the code paths and the first entries exist before the baseline.
        const failed = await poolFlood(pool, 500, (i) => options(count + i));
        const before = rssBytes(s.child.pid);
        failed.push(...(await poolFlood(pool, count, options)));
        const growth = rssBytes(s.child.pid) - before;
        const status = await (await request(`${s.adminUrl}/status`)).body.json();
        return { growth, cache: status.cache, failed, alive: s.child.exitCode === null };
      } finally {
        await pool.close();
        await s.stop();
      }
    };
    const mib = (bytes) => `${(bytes / MIB).toFixed(0)} MiB`;
    /** Every request of a flood of `count` answered 200, and the process still alive. */
    const answeredAlive = (what, run, count) =>
      figure(
        `${what}: answered 200, alive`,
        `${count - run.failed.length} of ${count.toLocaleString('en')}, ${run.alive ? 'alive' : 'exited'}`,
        'all, alive',
        run.failed.length === 0 && run.alive,
      );

    let run = await grow({}, 20_000, (i) => ({
      path: `/v1.0/cached/contracts/?page=${i}`,
      method: 'GET',
    }));
    answeredAlive('cache, 20,000 distinct keys', run, 20_000);
    figure(
      'cache, 20,000 distinct keys: entries held',
      run.cache.entries,
      '<= 10,000 (cache.maxEntries)',
      run.cache.entries <= 10_000,
    );
    figure(
      'cache, 20,000 distinct keys: RSS growth',
      mib(run.growth),
      '<= 100 MiB (64 MiB + 10 % + 30 MiB)',
      run.growth <= 64 * MIB * 1.1 + 30 * MIB,
    );

    const pad = (i) => `${i}-${'p'.repeat(12 * 1024)}`;
    run = await grow({ CACHE_MAX_BYTES: String(4 * MIB) }, 3_000, (i) => ({
      path: `/v1.0/cached/items/?vary=1&k=${i % 300}`,
      method: 'GET',
      headers: { 'x-pad': pad(i) },
    }));
    answeredAlive('cache, 3,000 Vary variants of 12 KB', run, 3_000);
    figure(
      'cache, 3,000 Vary variants of 12 KB: held',
      `${run.cache.entries} entries, ${mib(run.cache.bytes)}`,
      '<= 4 MiB, < 400 entries',
      run.cache.bytes <= 4 * MIB && run.cache.entries < 400,
    );
    // On Node 24 the flood's own 36 MB of header values leave 21–35 MiB in RSS.
    figure(
      'cache, 3,000 Vary variants of 12 KB: RSS growth',
      mib(run.growth),
      '<= 49 MiB (4 MiB + 10 % + 45 MiB)',
      run.growth <= 4 * MIB * 1.1 + 45 * MIB,
    );
  },

  /** Fair share at 10/s: an interactive caller's latency beside a flood, weighted shares. */
  async 'fair-share'(fx) {
    const client = new Agent({ connections: 128 });
    cleanups.push(() => client.close());
    const base = {
      UPSTREAM_BASE_URL: fx.standin.url,
      UPSTREAM_CA_FILE: fx.env.UPSTREAM_CA_FILE,
      TOKEN_URL: fx.env.TOKEN_URL,
      CLIENT_ID: 'hostile',
      CLIENT_SECRET: 'hostile-secret',
      UPSTREAM_RATE_LIMIT: '10/s',
      QUOTA_CALLER_HEADER: 'x-caller',
    };
    const get = async (s, path, caller) => {
      const started = performance.now();
      const res = await request(`${s.proxyUrl}${path}`, {
        dispatcher: client,
        headers: caller === undefined ? {} : { 'x-caller': caller },
      });
      await res.body.dump();
      return { status: res.statusCode, ms: performance.now() - started };
    };
    const flood = (s, marker, caller) => {
      let stopped = false;
      const done = Promise.all(
        Array.from({ length: 30 }, async (_, i) => {
          for (let n = 0; !stopped; n++)
            await get(s, `/v1.0/contracts/?${marker}=${i}-${n}`, caller);
        }),
      );
      return async () => {
        stopped = true;
        await done;
      };
    };
    const seen = (marker, since = 0) =>
      fx.standin.apiRequests.filter((r) => r.url.includes(`${marker}=`) && r.at >= since).length;

    let s = await sidecar({ ...base, QUOTA_CALLERS: 'nightly=1:batch' });
    let stop = flood(s, 'gw-batch', 'nightly');
    await until(() => seen('gw-batch') >= 10, 10_000, 'the batch caller to use the bucket');
    const answers = [];
    for (let i = 0; i < 20; i++) {
      const due = performance.now() + 300;
      answers.push(await get(s, `/v1.0/contracts/?gw-ui=${i}`, 'reports-ui'));
      const left = due - performance.now();
      if (left > 0) await sleep(left);
    }
    await stop();
    await s.stop();
    const ok = answers.filter((a) => a.status === 200);
    const p95 = percentile(
      ok.map((a) => a.ms).sort((a, b) => a - b),
      95,
    );
    figure(
      'fair share: interactive answers 200 beside a 30-loop batch flood',
      `${ok.length} of 20`,
      '>= 19',
      ok.length >= 19,
    );
    figure('fair share: interactive p95', `${p95.toFixed(0)} ms`, '<= 250 ms', p95 <= 250);

    s = await sidecar({ ...base, QUOTA_CALLERS: 'big=3:batch,small=1:batch' });
    const stopBig = flood(s, 'w-big', 'big');
    const stopSmall = flood(s, 'w-small', 'small');
    await until(() => seen('w-big') + seen('w-small') >= 20, 10_000, 'the first bucket');
    let since = Date.now();
    await sleep(6_000);
    await Promise.all([stopBig(), stopSmall()]);
    await s.stop();
    const ratio = seen('w-big', since) / seen('w-small', since);
    figure(
      'fair share: weights 3:1, API requests big/small',
      ratio.toFixed(2),
      '2.4-3.6',
      ratio >= 2.4 && ratio <= 3.6,
    );

    s = await sidecar(base);
    stop = flood(s, 'alone');
    await until(() => seen('alone') >= 10, 10_000, 'the first bucket');
    since = Date.now();
    await sleep(5_000);
    const elapsed = Date.now() - since;
    await stop();
    await s.stop();
    const share = seen('alone', since) / (10 * (elapsed / 1000));
    figure(
      'fair share: one caller alone, share of the rate',
      share.toFixed(2),
      '>= 0.85',
      share >= 0.85,
    );
  },
};

await runScript(
  'hostile-load',
  async () => {
    const fx = await limitsFixture(answer);
    for (const [name, run] of Object.entries(scenarios)) {
      if (only !== undefined && only !== name) continue;
      say(`${name} (node ${process.versions.node})`);
      await run(fx);
    }
    if (failures.length > 0 && bounded) {
      say(`out of bound: ${failures.join('; ')}`);
      return 1;
    }
    return 0;
  },
  { cleanups, work, keep: false },
);
