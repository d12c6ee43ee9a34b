import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll } from 'vitest';
import { startStandin, type Standin } from '../../src/standin/index.js';
import type { StoreStatus } from '../../src/token/coordination.js';
import { closed, exitOf, outputOf } from './command.js';
import { waitFor } from './wait.js';

export { waitFor };

export const MAIN = join(import.meta.dirname, '..', '..', 'dist', 'main.js');

export interface SidecarProcess {
  child: ChildProcessWithoutNullStreams;
  /** Every stdout line so far (JSON log lines and printed text). */
  stdout: string[];
  stderr: string[];
  proxyUrl: string;
  adminUrl: string;
  /** Resolves with the exit code (or signal name) once the process has ended. */
  exited: Promise<number | string>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

const tempDirs: string[] = [];
// Temp files may hold test credentials: removed after the importing test file (vitest loads this
// module once per file, so the hook joins that file's root suite).
afterAll(() => {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A fresh temp directory, removed after the test file that made it. */
export function tempDir(prefix = 'oauth-sidecar-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

/** Write a PEM to a temp file and return its path (for UPSTREAM_CA_FILE). */
export function writeTemp(name: string, content: string): string {
  const dir = tempDir();
  const file = join(dir, name);
  writeFileSync(file, content);
  return file;
}

/** A fixture's part, started in a beforeAll: there in tests and hooks, an error before. */
export function readyInTests<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`${what} is ready in tests and hooks only`);
  return value;
}

export interface StandinFixture {
  readonly standin: Standin;
  /** The stand-in's CA as a file, for UPSTREAM_CA_FILE. */
  readonly caFile: string;
}

/**
 * A stand-in API for the calling test file: started in its beforeAll (with its CA written to a
 * temp file), closed in its afterAll. Read `standin` and `caFile` from tests and hooks.
 */
export function useStandin(client: { clientId: string; clientSecret: string }): StandinFixture {
  let standin: Standin | undefined;
  let caFile: string | undefined;
  beforeAll(async () => {
    standin = await startStandin(client);
    caFile = writeTemp('ca.pem', standin.caCert);
  });
  afterAll(async () => {
    await standin?.close();
  });
  const ready = <T>(value: T | undefined): T => readyInTests(value, 'the stand-in');
  return {
    get standin() {
      return ready(standin);
    },
    get caFile() {
      return ready(caFile);
    },
  };
}

/**
 * Run `node dist/main.js <args>` to completion (in `cwd`, default this process's). `timeoutMs` is
 * a limit for hangs: generous, since tests run side by side on a loaded machine start their
 * processes slowly (docs/testing.md "Tests side by side").
 */
export function runCli(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
  cwd?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [MAIN, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  const output = outputOf(child);
  return new Promise((resolve, reject) => {
    let hung = false;
    const timer = setTimeout(() => {
      hung = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    void output.then((result) => {
      clearTimeout(timer);
      if (!hung) {
        resolve(result);
        return;
      }
      const { stdout, stderr } = result;
      const shown = `${stdout}\n${stderr}`;
      reject(
        new Error(`oauth-sidecar ${args.join(' ')} did not exit within ${timeoutMs} ms\n${shown}`),
      );
    });
  });
}

export interface DemoProcess {
  child: ChildProcessWithoutNullStreams;
  /** Everything printed so far, stdout and stderr together. */
  output: { text: string };
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
}

/** Start `node dist/main.js demo` on loopback ports 0, with `env` on top. */
export function startDemo(env: Record<string, string> = {}): DemoProcess {
  const child = spawn(process.execPath, [MAIN, 'demo'], {
    env: {
      PATH: process.env.PATH ?? '',
      PROXY_LISTEN: '127.0.0.1:0',
      ADMIN_LISTEN: '127.0.0.1:0',
      ...env,
    },
  });
  const output = { text: '' };
  child.stdout.on('data', (d: Buffer) => (output.text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output.text += d.toString()));
  const exited = closed(child).then(({ code }) => code);
  return { child, output, exited };
}

/** Start a serving sidecar process and wait for its "listening" log line. */
export async function startSidecarProcess(
  env: Record<string, string>,
  args: string[] = [],
  nodeFlags: readonly string[] = [],
): Promise<SidecarProcess> {
  const child = spawn(process.execPath, [...nodeFlags, MAIN, ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      PROXY_LISTEN: '127.0.0.1:0',
      ADMIN_LISTEN: '127.0.0.1:0',
      ...env,
    },
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  let partial = '';
  const exited = closed(child).then(exitOf);
  const listening = new Promise<{ proxy: string; admin: string }>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      const lines = (partial + d.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        stdout.push(line);
        if (line.includes('oauth-sidecar listening')) {
          const parsed = JSON.parse(line) as { proxy: string; admin: string };
          resolve(parsed);
        }
      }
    });
    child.stderr.on('data', (d: Buffer) => stderr.push(d.toString()));
    void exited.then((code) =>
      reject(
        new Error(
          `sidecar exited (${code}) before listening:\n${stdout.join('\n')}\n${stderr.join('')}`,
        ),
      ),
    );
  });
  const { proxy, admin } = await listening;
  return {
    child,
    stdout,
    stderr,
    proxyUrl: `http://${proxy}`,
    adminUrl: `http://${admin}`,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Wait until the sidecar's /readyz answers 200 (it holds a token). */
export function waitReady(sidecar: Pick<SidecarProcess, 'adminUrl'>, timeoutMs = 10_000) {
  return waitFor(
    async () => (await request(`${sidecar.adminUrl}/readyz`)).statusCode === 200,
    timeoutMs,
    'readyz',
  );
}

/** The value of one sample line of a sidecar's /metrics (`name{labels}` as printed), 0 if absent. */
export async function metricValue(
  sidecar: Pick<SidecarProcess, 'adminUrl'>,
  sample: string,
): Promise<number> {
  const text = await (await request(`${sidecar.adminUrl}/metrics`)).body.text();
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  return line === undefined ? 0 : Number(line.slice(sample.length + 1));
}

/** `/status`'s store: what the process says of its store now. */
export async function storeStatus(sidecar: Pick<SidecarProcess, 'adminUrl'>): Promise<StoreStatus> {
  const { store } = (await (await request(`${sidecar.adminUrl}/status`)).body.json()) as {
    store?: StoreStatus;
  };
  if (store === undefined) throw new Error('/status shows no store');
  return store;
}

/**
 * `/status`'s store once it shows `up`. The verdict is live: one store call past the shipped
 * 500 ms bound (a machine running the whole suite) shows the store down until the next call or
 * health check (docs/token-store.md "What happens when it fails"). Not up within `timeoutMs`
 * fails with the last status, its `lastError` included.
 */
export async function storeOnceUp(
  sidecar: Pick<SidecarProcess, 'adminUrl'>,
  timeoutMs = 5_000,
): Promise<StoreStatus> {
  let last: StoreStatus | undefined;
  try {
    await waitFor(async () => (last = await storeStatus(sidecar)).up, timeoutMs, 'the store up');
  } catch (error) {
    throw new Error(`${String(error)}; the last /status store: ${JSON.stringify(last)}`);
  }
  return last!;
}
