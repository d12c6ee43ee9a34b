// A real forward proxy, Debian's `tinyproxy`, on a free loopback port with its own configuration
// file (Basic credentials, the ports `CONNECT` may reach) and its own log. The egress proxy tests
// (through test/helpers/tinyproxy.ts) and the soak's egress phase go through it; its log shows
// each tunnel. A missing binary is an error that says what to install, never a skip.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './lib.mjs';

export const TINYPROXY_BIN = process.env.TINYPROXY_BIN ?? 'tinyproxy';

function missingTinyproxy() {
  if (spawnSync(TINYPROXY_BIN, ['-v'], { encoding: 'utf8' }).status === 0) return undefined;
  return (
    `${TINYPROXY_BIN} not found: install the Debian package (apt-get install -y tinyproxy) or set ` +
    'TINYPROXY_BIN; the egress proxy tests need a real forward proxy and are not skipped'
  );
}

/** True once something accepts connections on 127.0.0.1:port. */
function accepts(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function writeConfig(dir, port, options) {
  const logFile = join(dir, 'tinyproxy.log');
  const configFile = join(dir, 'tinyproxy.conf');
  writeFileSync(
    configFile,
    [
      `Port ${port}`,
      'Listen 127.0.0.1',
      'Allow 127.0.0.1',
      'Timeout 30',
      'MaxClients 200',
      `LogFile "${logFile}"`,
      'LogLevel Info',
      `PidFile "${join(dir, 'tinyproxy.pid')}"`,
      'DisableViaHeader Yes',
      ...options.connectPorts.map((p) => `ConnectPort ${p}`),
      ...(options.user === undefined ? [] : [`BasicAuth ${options.user} ${options.password}`]),
      '',
    ].join('\n'),
  );
  writeFileSync(logFile, '');
  return { logFile, configFile };
}

/** Start `tinyproxy -d` on a free 127.0.0.1 port and wait until it accepts connections. */
export async function startTinyproxy(options) {
  const missing = missingTinyproxy();
  if (missing !== undefined) throw new Error(missing);
  const port = await freePort();
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'oauth-sidecar-tinyproxy-'));
  mkdirSync(dir, { recursive: true });
  const { logFile, configFile } = writeConfig(dir, port, options);
  let child;
  let output = '';

  const launch = async () => {
    const proc = spawn(TINYPROXY_BIN, ['-d', '-c', configFile], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    const keep = (d) => (output = (output + d.toString()).slice(-4000));
    proc.stdout.on('data', keep);
    proc.stderr.on('data', keep);
    const deadline = Date.now() + 10_000;
    while (!(await accepts(port))) {
      if (proc.exitCode !== null) throw new Error(`tinyproxy exited at start:\n${output}`);
      if (Date.now() > deadline) throw new Error(`tinyproxy did not listen:\n${output}`);
      await sleep(20);
    }
  };

  const stop = async () => {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };

  const log = () => readFileSync(logFile, 'utf8');
  await launch();
  return {
    port,
    url(credentials) {
      const user = credentials?.user ?? options.user;
      const password = credentials?.password ?? options.password;
      const auth =
        user === undefined
          ? ''
          : `${encodeURIComponent(user)}:${encodeURIComponent(password ?? '')}@`;
      return `http://${auth}127.0.0.1:${port}`;
    },
    log,
    tunnels: () =>
      [...log().matchAll(/Request \(file descriptor \d+\): CONNECT (\S+) HTTP/g)].map(
        (match) => match[1],
      ),
    stop,
    start: launch,
    close: stop,
  };
}
