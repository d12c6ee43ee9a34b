/**
 * The setup most process tests share: the HTTPS stand-in as the API (its CA in a file), a real
 * redis-server when asked, and sidecar processes (the bundle) started ready and stopped after
 * each test, or after the file for members its tests share. Registers its own vitest hooks: call it
 * once at the top of a test file.
 */
import { afterAll, afterEach, beforeAll } from 'vitest';
import { createTestPki, startStandin, type Standin } from '../../src/standin/index.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import {
  startSidecarProcess,
  waitReady,
  writeTemp,
  type SidecarProcess,
} from './sidecar-process.js';

export interface StandinFleet {
  readonly standin: Standin;
  /** Only with `{ redis: true }`. */
  readonly redis: RedisServer;
  /** The environment every sidecar starts with: the stand-in, its CA, the demo client. */
  base(): Record<string, string>;
  /** A sidecar process with `base()` and `env`, ready (a token held); stopped after the test. */
  start(env: Record<string, string>): Promise<SidecarProcess>;
  /** As `start`, but stopped after the file's last test: a member the file's tests share. */
  startForFile(env: Record<string, string>): Promise<SidecarProcess>;
}

export function useStandinFleet(
  options: { redis?: boolean; tokenLifetimeSeconds?: number } = {},
): StandinFleet {
  let standin: Standin | undefined;
  let redis: RedisServer | undefined;
  let caFile = '';
  const running: SidecarProcess[] = [];
  const forFile: SidecarProcess[] = [];

  beforeAll(async () => {
    const pki = await createTestPki();
    standin = await startStandin({
      pki,
      ...(options.tokenLifetimeSeconds !== undefined && {
        tokenLifetimeSeconds: options.tokenLifetimeSeconds,
      }),
    });
    caFile = writeTemp('ca.pem', pki.caCert);
    if (options.redis === true) redis = await startRedisServer();
  });

  afterEach(async () => {
    await Promise.all(running.splice(0).map((s) => s.stop()));
  });

  afterAll(async () => {
    await Promise.all(forFile.splice(0).map((s) => s.stop()));
    await redis?.close(); // undefined when redis-server is missing: its own error says so
    await standin?.close();
  });

  return {
    get standin() {
      return standin!;
    },
    get redis() {
      return redis!;
    },
    base: () => ({
      UPSTREAM_BASE_URL: standin!.url,
      UPSTREAM_CA_FILE: caFile,
      CLIENT_ID: 'demo-client',
      CLIENT_SECRET: 'demo-secret',
    }),
    async start(env) {
      const sidecar = await startSidecarProcess({ ...this.base(), ...env });
      running.push(sidecar);
      await waitReady(sidecar);
      return sidecar;
    },
    async startForFile(env) {
      const sidecar = await startSidecarProcess({ ...this.base(), ...env });
      forFile.push(sidecar);
      await waitReady(sidecar);
      return sidecar;
    },
  };
}
