/**
 * A real forward proxy, Debian's `tinyproxy`, on a free loopback port with its own configuration
 * file (Basic credentials, the ports `CONNECT` may reach) and its own log: the egress proxy tests
 * go through it, and its log shows each tunnel.
 *
 * A missing binary is a failure that says what to install, never a skip.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { freePort } from './redis-server.js';
import { tempDir } from './sidecar-process.js';

export const TINYPROXY_BIN = process.env.TINYPROXY_BIN ?? 'tinyproxy';

export interface TinyproxyOptions {
  /** `BasicAuth` credentials; none: the proxy asks for none. */
  user?: string;
  password?: string;
  /** Ports `CONNECT` may reach (`ConnectPort`); others are answered 403. */
  connectPorts: number[];
}

export interface Tinyproxy {
  readonly port: number;
  /** `http://[user:password@]127.0.0.1:PORT` with the given (default: configured) credentials. */
  url(credentials?: { user: string; password: string }): string;
  /** The proxy's own log so far. */
  log(): string;
  /** The `CONNECT` targets in its log, in order (`127.0.0.1:443`). */
  tunnels(): string[];
  /** Stop (SIGTERM, SIGKILL after 5 s); the port stays reserved for `start()`. */
  stop(): Promise<void>;
  /** Start again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

function missingTinyproxy(): string | undefined {
  if (spawnSync(TINYPROXY_BIN, ['-v'], { encoding: 'utf8' }).status === 0) return undefined;
  return (
    `${TINYPROXY_BIN} not found: install the Debian package (apt-get install -y tinyproxy) or set ` +
    'TINYPROXY_BIN; the egress proxy tests need a real forward proxy and are not skipped'
  );
}

/** True once something accepts connections on 127.0.0.1:port. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Start `tinyproxy -d` on a free 127.0.0.1 port and wait until it accepts connections. */
export async function startTinyproxy(options: TinyproxyOptions): Promise<Tinyproxy> {
  const missing = missingTinyproxy();
  if (missing !== undefined) throw new Error(missing);
  const port = await freePort();
  const dir = tempDir('oauth-sidecar-tinyproxy-');
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
  let child: ChildProcess | undefined;
  let output = '';

  const launch = async (): Promise<void> => {
    const proc = spawn(TINYPROXY_BIN, ['-d', '-c', configFile], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    proc.stdout?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
    proc.stderr?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
    const deadline = Date.now() + 10_000;
    while (!(await accepts(port))) {
      if (proc.exitCode !== null) throw new Error(`tinyproxy exited at start:\n${output}`);
      if (Date.now() > deadline) throw new Error(`tinyproxy did not listen:\n${output}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  const stop = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };

  const log = (): string => readFileSync(logFile, 'utf8');
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
        (match) => match[1]!,
      ),
    stop,
    start: launch,
    close: stop,
  };
}
