// Helpers shared by the bench scripts: each script's start (options, work folder, cleanups), free
// ports, a throwaway PKI, the stand-in token endpoint, nginx, child processes, /proc readings and
// Prometheus text parsing. Plain ESM so it runs without a build step;
// the sidecar itself is always the built one (dist/).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL, fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** Print a line (the lint config keeps console out of shipped code; these are CLI scripts). */
export function say(line = '') {
  process.stdout.write(`${line}\n`);
}

/** A port that was free a moment ago on 127.0.0.1 (for processes that must be told their port). */
export async function freePort() {
  return (await freePorts(1))[0];
}

/**
 * `count` distinct free ports: every one is held until all are found (two freePort() calls in a
 * row can be given the same port, and a sidecar then fails to bind its admin listener).
 */
export async function freePorts(count) {
  const servers = [];
  try {
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
      });
    }
    return servers.map((server) => server.address().port);
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

/** A temp work dir readable by nginx's unprivileged workers. */
export function makeWorkDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o755);
  return dir;
}

/**
 * Throwaway CA + server certificate for 127.0.0.1/localhost with the openssl CLI (~0.1 s). One CA
 * for nginx, the stand-in and the sidecar's UPSTREAM_CA_FILE.
 */
export function makePki(dir) {
  const f = (name) => join(dir, name);
  const ossl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ossl(
    'req',
    '-x509',
    ...ec,
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=oauth-sidecar bench CA',
  );
  ossl('req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=localhost');
  writeFileSync(
    f('ext.cnf'),
    'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n',
  );
  ossl(
    'x509',
    '-req',
    '-in',
    f('server.csr'),
    '-CA',
    f('ca.pem'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-out',
    f('server.pem'),
    '-days',
    '2',
    '-extfile',
    f('ext.cnf'),
  );
  for (const name of ['ca.pem', 'server.pem', 'server.key']) chmodSync(f(name), 0o644);
  return {
    caFile: f('ca.pem'),
    certFile: f('server.pem'),
    keyFile: f('server.key'),
    caCert: readFileSync(f('ca.pem'), 'utf8'),
    serverCert: readFileSync(f('server.pem'), 'utf8'),
    serverKey: readFileSync(f('server.key'), 'utf8'),
  };
}

/** A child process whose output goes to a log file; `stop()` signals only this pid. */
export function startChild(command, args, { env, logFile, cwd = ROOT } = {}) {
  const fd = openSync(logFile, 'a');
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', fd, fd] });
  let exited = false;
  const exit = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      resolve({ code, signal });
    }),
  );
  return {
    child,
    pid: child.pid,
    exit,
    get exited() {
      return exited;
    },
    async stop(signal = 'SIGTERM', graceMs = 5000) {
      if (exited) return exit;
      child.kill(signal);
      const timer = sleep(graceMs).then(() => 'timeout');
      if ((await Promise.race([exit, timer])) === 'timeout') child.kill('SIGKILL');
      return exit;
    },
  };
}

/** GET a URL until it answers `status` (or give up after `timeoutMs`). */
export async function waitForStatus(
  url,
  { status = 200, timeoutMs = 15000, dispatcher, isAlive } = {},
) {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (isAlive && !isAlive()) throw new Error(`process died while waiting for ${url}`);
    try {
      const res = await request(url, { dispatcher, headersTimeout: 2000, bodyTimeout: 2000 });
      await res.body.dump();
      if (res.statusCode === status) return;
      last = `status ${res.statusCode}`;
    } catch (err) {
      last = err.code ?? err.message;
    }
    await sleep(100);
  }
  throw new Error(`${url} did not answer ${status} within ${timeoutMs} ms (last: ${last})`);
}

/** An undici Agent trusting the throwaway CA. */
export function caAgent(caCert) {
  return new Agent({ connect: { ca: caCert } });
}

/** utime + stime of a process (all its threads), in clock ticks. */
export function cpuTicks(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
  return Number(fields[11]) + Number(fields[12]);
}

/** A `kB` line of /proc/<pid>/status (VmRSS, VmHWM) in bytes. */
export function procStatusBytes(pid, key) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
  return match ? Number(match[1]) * 1024 : NaN;
}

/** The pid and its direct children (nginx master + workers). */
export function processTree(pid) {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
    return [pid, ...children];
  } catch {
    return [pid];
  }
}

/** Parse Prometheus text format into [{ name, labels, value }]. */
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const m of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2];
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** Sum of a metric's samples whose labels match `where`. */
export function metricSum(samples, name, where = {}) {
  return samples
    .filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

export async function scrape(adminUrl) {
  const res = await request(`${adminUrl}/metrics`, { headersTimeout: 5000, bodyTimeout: 5000 });
  return parseMetrics(await res.body.text());
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index];
}

export function median(values) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** Environment for `node dist/main.js` pointed at an upstream and a token endpoint. */
export function sidecarEnv({ upstream, tokenUrl, caFile, proxyPort, adminPort, extra = {} }) {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    UPSTREAM_BASE_URL: upstream,
    UPSTREAM_CA_FILE: caFile,
    TOKEN_URL: tokenUrl,
    CLIENT_ID: 'bench-client',
    CLIENT_SECRET: 'bench-secret',
    PROXY_LISTEN: `127.0.0.1:${proxyPort}`,
    ADMIN_LISTEN: `127.0.0.1:${adminPort}`,
    LOG_LEVEL: 'warn',
    ...extra,
  };
}

/** Format helpers for tables. */
export const fmt = {
  int: (n) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a'),
  ms: (n) => (Number.isFinite(n) ? `${n.toFixed(2)} ms` : 'n/a'),
  mib: (bytes) => (Number.isFinite(bytes) ? `${(bytes / 1048576).toFixed(0)} MiB` : 'n/a'),
  x: (n) => (Number.isFinite(n) ? `${n.toFixed(2)}×` : 'n/a'),
  us: (n) => (Number.isFinite(n) ? `${n.toFixed(1)} µs` : 'n/a'),
};

/**
 * Run a bench script's `main` and exit: 0, or 1 when `main` resolves to 1 (an expectation was
 * violated), or 2 when it throws, or 130 / 143 on SIGINT / SIGTERM (Ctrl-C, a kill): the
 * processes the run started go with it instead of serving on. Cleanups run once, in reverse
 * order, each best effort. The work directory is removed unless `keep` is set or the run crashed
 * (its logs are the evidence).
 */
export async function runScript(name, main, { cleanups, work, keep }) {
  let finishing;
  const finish = (exitCode) =>
    (finishing ??= (async () => {
      for (const cleanup of cleanups.reverse()) {
        try {
          await cleanup();
        } catch {
          // best effort: the next cleanup still runs
        }
      }
      if (!keep && exitCode !== 2) rmSync(work, { recursive: true, force: true });
      await sleep(10);
      process.exit(exitCode);
    })());
  process.once('SIGINT', () => void finish(130));
  process.once('SIGTERM', () => void finish(143));
  let exitCode = 0;
  try {
    exitCode = (await main()) === 1 ? 1 : 0;
  } catch (err) {
    process.stderr.write(`${name} failed: ${err.stack ?? err}\n(logs in ${work})\n`);
    exitCode = 2;
  }
  await finish(exitCode);
}

/**
 * A bench script's start: its options parsed (node's parseArgs, with `--keep` and `--help` added
 * to every script), a fresh work folder, and the cleanup list its run empties. `--help` prints the
 * script's header comment (everything above its first import) and exits.
 * `runMain(name, main)` is {@link runScript} with these.
 *
 *   const { args, work, cleanups, runMain } = benchScript(import.meta.url, 'oauth-sidecar-x-', {...});
 */
export function benchScript(scriptUrl, workPrefix, options) {
  const { values: args } = parseArgs({
    options: {
      ...options,
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (args.help) {
    const header = readFileSync(new URL(scriptUrl), 'utf8').split('\nimport ')[0];
    say(header.replace(/^\/\/ ?/gm, ''));
    process.exit(0);
  }
  const work = makeWorkDir(workPrefix);
  const cleanups = [];
  const runMain = (name, main) => runScript(name, main, { cleanups, work, keep: args.keep });
  return { args, work, cleanups, runMain };
}

/**
 * The token endpoint the bench sidecars use (the built stand-in, dist/standin) on `pki`'s server
 * certificate, as client `bench-client`; closed by `cleanups`. `tokenLifetimeSeconds`: an hour
 * unless a script measures renewals.
 */
export async function startBenchStandin(pki, cleanups, { tokenLifetimeSeconds = 3600 } = {}) {
  const { startStandin } = await import(
    pathToFileURL(join(ROOT, 'dist', 'standin', 'index.js')).href
  );
  const standin = await startStandin({
    clientId: 'bench-client',
    clientSecret: 'bench-secret',
    tokenLifetimeSeconds,
    pki: { caCert: pki.caCert, serverCert: pki.serverCert, serverKey: pki.serverKey },
  });
  cleanups.push(() => standin.close());
  return standin;
}

function hasTool(tool) {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * CPU pinning with taskset (2+ cores, unless `--no-pin`): the process under test on CPU 1, the
 * load generator, the upstream and this script on CPU 0, so each CPU figure is its own.
 */
export function pinning(noPin) {
  const pinned = !noPin && cpus().length >= 2 && hasTool('taskset');
  return {
    pinned,
    /** `[command, argv]` to start `command` on `cpu` (unchanged when not pinned). */
    onCpu: (cpu, command, argv) =>
      pinned ? ['taskset', ['-c', String(cpu), command, ...argv]] : [command, argv],
    /** This script on CPU 0. */
    pinSelf() {
      if (pinned) execFileSync('taskset', ['-pc', '0', String(process.pid)], { stdio: 'ignore' });
    },
  };
}

/**
 * A real redis-server on a free loopback port, no persistence (the Debian package's binary);
 * stopped by `cleanups`. `wrap` pins it (`pinning().onCpu`).
 */
export async function startRedisServer(cleanups, wrap = (command, argv) => [command, argv]) {
  const bin = process.env.REDIS_SERVER_BIN ?? 'redis-server';
  if (spawnSync(bin, ['--version']).status !== 0) {
    throw new Error(`${bin} not found: apt-get install -y redis-server (the fleet phase needs it)`);
  }
  const port = await freePort();
  let child;
  const launch = () => {
    const [command, argv] = wrap(bin, [
      ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    ]);
    child = spawn(command, argv, { stdio: 'ignore' });
  };
  const kill = async () => {
    child.kill('SIGTERM');
    await new Promise((resolve) =>
      child.exitCode === null && child.signalCode === null
        ? child.once('exit', resolve)
        : resolve(),
    );
  };
  launch();
  cleanups.push(kill);
  const redisCommand = (line) =>
    new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let data = '';
      socket.on('error', reject);
      socket.on('data', (d) => {
        data += d;
        if (/\r\n$/.test(data) && (!data.startsWith('$') || data.split('\r\n').length > 2)) {
          socket.end();
          resolve(data);
        }
      });
      socket.write(`${line}\r\n`);
    });
  const ready = async () => {
    for (let i = 0; ; i++) {
      try {
        if ((await redisCommand('PING')).includes('PONG')) break;
      } catch {
        if (i > 200) throw new Error('redis-server did not start');
      }
      await sleep(25);
    }
  };
  await ready();
  return {
    url: `redis://127.0.0.1:${port}`,
    command: redisCommand,
    /** Stop and start again on the same port: empty, as a store without persistence comes back. */
    async restart() {
      await kill();
      launch();
      await ready();
    },
  };
}

/** A 2 KB JSON answer shaped like the API's contracts listing (the benches' upstream body). */
export function contractsJson() {
  const data = [];
  let text = '';
  for (let i = 0; ; i++) {
    data.push({ shortName: `spark${i}`, fullName: `Spark contract ${i}`, type: 'freight' });
    const next = JSON.stringify({ data });
    if (next.length > 2048) break;
    text = next;
  }
  return text.padEnd(2048, ' ');
}

/**
 * Import a TypeScript module of this repository (a test helper: one starter for the tests and the
 * bench) bundled by esbuild (a dev dependency) into `dir`; its node_modules imports stay imports.
 */
export async function importTypeScript(relativePath, dir) {
  const { build } = await import('esbuild');
  const outfile = join(dir, `${relativePath.replace(/\W+/g, '-')}.mjs`);
  await build({
    entryPoints: [join(ROOT, relativePath)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'error',
    outfile,
  });
  return import(pathToFileURL(outfile).href);
}
