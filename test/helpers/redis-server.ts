/**
 * A real `redis-server` (Debian package `redis-server`) on a free loopback port, for every test
 * that involves the shared store. No persistence: a restart empties it, as a crashed cache would.
 *
 * A missing binary is a failure that says what to install (CI=true or not), never a skip.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Fatal, waitFor } from './wait.js';

export { Fatal };

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? 'redis-server';

/** True when `redis-server --version` runs. */
export function redisServerAvailable(): boolean {
  const probe = spawnSync(REDIS_SERVER_BIN, ['--version'], { encoding: 'utf8' });
  return probe.status === 0;
}

/** Why the store tests cannot run, or undefined when `redis-server` is there. Never a skip: a failure. */
export function missingRedisServer(): string | undefined {
  if (redisServerAvailable()) return undefined;
  return (
    `${REDIS_SERVER_BIN} not found: install the Debian package (apt-get install -y redis-server) ` +
    'or set REDIS_SERVER_BIN; the token store tests need a real Redis and are not skipped'
  );
}

export interface RedisServer {
  readonly port: number;
  /** `redis://127.0.0.1:PORT` */
  readonly url: string;
  /** Stop (SIGTERM, SIGKILL after 5 s); the port stays reserved for `start()`. */
  stop(): Promise<void>;
  /** Start again on the same port (empty: no persistence). */
  start(): Promise<void>;
  /** Every key and its value as stored (strings and hashes), for tests that look for leaks. */
  dump(): Promise<Map<string, string>>;
  /** SIGSTOP / SIGCONT: a server that accepts connections but never answers. */
  pause(): void;
  resume(): void;
  /** Send one command and return the raw RESP reply text. */
  command(...args: string[]): Promise<string>;
  close(): Promise<void>;
}

/** A port free on 127.0.0.1 now (bound once and released). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address === null || typeof address === 'string') reject(new Error('no port'));
        else resolve(address.port);
      });
    });
  });
}

/**
 * `count` distinct free ports: each listener is held open until all are chosen, so the kernel
 * cannot hand the same port out twice (sequential `freePort()` calls may get one port back).
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  try {
    return await Promise.all(
      servers.map(
        (server) =>
          new Promise<number>((resolve, reject) => {
            server.once('error', reject);
            server.listen(0, '127.0.0.1', () => {
              const address = server.address();
              if (address === null || typeof address === 'string') reject(new Error('no port'));
              else resolve(address.port);
            });
          }),
      ),
    );
  } finally {
    await Promise.all(
      servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
    );
  }
}

/** A started `redis-server` and the last of what it printed. */
export interface RedisProcess {
  port: number;
  child: ChildProcess;
  output: string;
}

/** The arguments of a `redis-server` on `port` (loopback, no persistence, in `dir`), then `extra`. */
export function redisServerArgs(
  port: number,
  dir: string,
  extra: readonly string[] = [],
): string[] {
  return [
    ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    ...['--dir', dir, '--daemonize', 'no', ...extra],
  ];
}

/** Start `redis-server` with `args` (a sentinel's too), keeping the last 4,000 characters it prints. */
export function spawnRedisServer(args: readonly string[], port = Number(args[1])): RedisProcess {
  const child = spawn(REDIS_SERVER_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const proc: RedisProcess = { port, child, output: '' };
  const keep = (d: Buffer) => (proc.output = (proc.output + d.toString()).slice(-4000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return proc;
}

/**
 * Poll `ready` every 20 ms until it is true; an error it throws counts as not yet (not listening),
 * a {@link Fatal} one ends the wait. Fails after `timeoutMs`.
 */
export function waitUntilUp(
  what: string,
  ready: () => Promise<boolean>,
  timeoutMs = 20_000,
): Promise<void> {
  return waitFor(ready, timeoutMs, what, { everyMs: 20, retryErrors: true });
}

/**
 * `commandTimeoutMs` for a store connection in a test that does not test a slow store: the
 * shipped 500 ms bound, on a machine running the whole suite, once failed a script call that a
 * quiet machine answers in a millisecond. The tests of the bound set their own (token-store).
 */
export const TEST_STORE_COMMAND_TIMEOUT_MS = 5_000;

/**
 * `start`, again on fresh ports (at most 3 attempts) when it fails with `retried` (a server that
 * exited before it was ready, one that found its port taken): a port freePort(s) handed out can be
 * taken before redis-server binds it (by another test's process or an outgoing connection's
 * ephemeral port; 12 ports for a 3+3 cluster, test files in parallel). Any other failure is thrown
 * as it is.
 */
export async function onFreshPorts<T>(
  start: () => Promise<T>,
  retried: abstract new (...args: never[]) => Error,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (error) {
      if (!(error instanceof retried) || attempt === 3) throw error;
    }
  }
}

/** A redis-server could not bind the port it was given: another process took it after freePort. */
class PortTaken extends Error {}

/**
 * Start `redis-server` on a free 127.0.0.1 port and wait until it answers PING. A port found free
 * can be taken before redis-server binds it (another test's process, an outgoing connection's
 * ephemeral port): the first start tries again on a fresh port, at most 3 times.
 */
export async function startRedisServer(options: { password?: string } = {}): Promise<RedisServer> {
  const missing = missingRedisServer();
  if (missing !== undefined) throw new Error(missing);
  let port = 0;
  const dir = mkdtempSync(join(tmpdir(), 'oauth-sidecar-redis-'));
  let child: ChildProcess | undefined;

  const launch = async (): Promise<void> => {
    const extra = options.password === undefined ? [] : ['--requirepass', options.password];
    const proc = spawnRedisServer(redisServerArgs(port, dir, extra));
    child = proc.child;
    const answers = async () => {
      if (proc.child.exitCode !== null) throw new Fatal('redis-server exited at start');
      return (await send(port, ['PING'], options.password)).includes('PONG');
    };
    await waitUntilUp('redis-server to answer PING', answers, 10_000).catch((error: Error) => {
      const Thrown = proc.output.includes('Address already in use') ? PortTaken : Error;
      throw new Thrown(`${error.message}:\n${proc.output}`);
    });
  };

  const stop = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGCONT');
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };

  await onFreshPorts(async () => {
    port = await freePort();
    await launch();
  }, PortTaken);
  const auth = options.password;
  return {
    port,
    url:
      auth === undefined
        ? `redis://127.0.0.1:${port}`
        : `redis://default:${encodeURIComponent(auth)}@127.0.0.1:${port}`,
    stop,
    start: launch,
    command: (...args) => send(port, args, auth),
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    async dump() {
      const out = new Map<string, string>();
      const keys = parseArray(await send(port, ['KEYS', '*'], auth));
      for (const key of keys) {
        const type = (await send(port, ['TYPE', key], auth)).trim().replace(/^\+/, '');
        const value =
          type === 'hash'
            ? parseArray(await send(port, ['HGETALL', key], auth)).join('\n')
            : await send(port, ['GET', key], auth);
        out.set(key, value);
      }
      return out;
    },
    async close() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * How long `send` waits for a reply: a test's own setup or inspection, not a test of the store's
 * speed, so generous (a clean-clone CI once saw a SET take over 2 s with the suite running).
 */
const SEND_TIMEOUT_MS = 10_000;

/** One command over a fresh connection (RESP2), raw reply. Test helper only: no pipelining. */
export function send(port: number, args: string[], password?: string): Promise<string> {
  const encode = (parts: string[]): string =>
    `*${parts.length}\r\n` + parts.map((p) => `$${Buffer.byteLength(p)}\r\n${p}\r\n`).join('');
  const frames = (password === undefined ? '' : encode(['AUTH', password])) + encode(args);
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`redis ${args[0]}: no answer within ${SEND_TIMEOUT_MS} ms`));
    }, SEND_TIMEOUT_MS);
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('data', (d: Buffer) => {
      data += d.toString('latin1');
      const body = password === undefined ? data : data.replace(/^\+OK\r\n/, '');
      if (complete(body)) {
        clearTimeout(timer);
        socket.end();
        resolve(body);
      }
    });
    socket.write(frames);
  });
}

/** Whether `text` holds one whole RESP2 reply. */
function complete(text: string): boolean {
  try {
    return parseReply(text, 0) !== undefined;
  } catch {
    return false;
  }
}

function parseReply(text: string, at: number): number | undefined {
  const end = text.indexOf('\r\n', at);
  if (end < 0) return undefined;
  const kind = text[at];
  const head = text.slice(at + 1, end);
  if (kind === '+' || kind === '-' || kind === ':') return end + 2;
  if (kind === '$') {
    const length = Number(head);
    if (length < 0) return end + 2;
    return text.length >= end + 2 + length + 2 ? end + 2 + length + 2 : undefined;
  }
  if (kind === '*') {
    let pos: number | undefined = end + 2;
    for (let i = 0; i < Number(head); i++) {
      pos = parseReply(text, pos);
      if (pos === undefined) return undefined;
    }
    return pos;
  }
  throw new Error(`unexpected RESP ${kind}`);
}

/** Bulk strings of a flat RESP2 array reply. */
function parseArray(text: string): string[] {
  const out: string[] = [];
  const lines = text.split('\r\n');
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line.startsWith('$') && line !== '$-1') {
      out.push(lines[i + 1] ?? '');
      i++;
    }
  }
  return out;
}
