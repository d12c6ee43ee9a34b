/**
 * The setup most process tests share: the HTTPS stand-in as the API (its CA in a file), a real
 * redis-server when asked, and sidecar processes (the bundle) started ready and stopped after
 * each test, or after the file for members its tests share. Registers its own vitest hooks: call it once at the top of a test file. A file whose
 * tests run side by side (`describe.concurrent`) hands each test's context over, so that a test's
 * sidecars stop when it finishes, not when another beside it does.
 */
import { afterAll, afterEach, beforeAll, type TestContext } from 'vitest';
import {
  createTestPki,
  startStandin,
  type Standin,
  type TestPki,
} from '../../src/standin/index.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import {
  startSidecarProcess,
  waitReady,
  writeTemp,
  type SidecarProcess,
} from './sidecar-process.js';

/** What a concurrent test hands over: the hook that runs when it finishes. */
export type OwnTest = Pick<TestContext, 'onTestFinished'>;

/** A stand-in and the sidecars in front of it. */
export interface Sidecars {
  readonly standin: Standin;
  /** The environment every sidecar starts with: the stand-in, its CA, the demo client. */
  base(): Record<string, string>;
  /** A sidecar process with `base()` and `env`, ready (a token held). */
  start(env: Record<string, string>): Promise<SidecarProcess>;
}

export interface StandinFleet {
  readonly standin: Standin;
  /** Only with `{ redis: true }`. */
  readonly redis: RedisServer;
  /** The environment every sidecar starts with: the stand-in, its CA, the demo client. */
  base(): Record<string, string>;
  /**
   * A sidecar process with `base()` and `env`, ready (a token held); stopped after the test, or
   * when `test` finishes.
   */
  start(env: Record<string, string>, test?: OwnTest): Promise<SidecarProcess>;
  /**
   * A stand-in of `test`'s own (the same CA): for a test beside others that changes what the API
   * or its token endpoint does. Its sidecars stop, then it closes, when the test finishes.
   */
  own(test: OwnTest, options?: { tokenLifetimeSeconds?: number }): Promise<Sidecars>;
  /** As `start`, but stopped after the file's last test: a member the file's tests share. */
  startForFile(env: Record<string, string>): Promise<SidecarProcess>;
}

export function useStandinFleet(
  options: { redis?: boolean; tokenLifetimeSeconds?: number } = {},
): StandinFleet {
  let pki: TestPki | undefined;
  let standin: Standin | undefined;
  let redis: RedisServer | undefined;
  let caFile = '';
  const running: SidecarProcess[] = [];
  const forFile: SidecarProcess[] = [];

  beforeAll(async () => {
    pki = await createTestPki();
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

  const baseOf = (api: Standin) => ({
    UPSTREAM_BASE_URL: api.url,
    UPSTREAM_CA_FILE: caFile,
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: 'demo-secret',
  });

  async function startReady(
    env: Record<string, string>,
    into: SidecarProcess[],
  ): Promise<SidecarProcess> {
    const sidecar = await startSidecarProcess(env);
    into.push(sidecar);
    await waitReady(sidecar);
    return sidecar;
  }

  return {
    get standin() {
      return standin!;
    },
    get redis() {
      return redis!;
    },
    base: () => baseOf(standin!),
    async start(env, test) {
      if (test === undefined) return startReady({ ...this.base(), ...env }, running);
      const mine: SidecarProcess[] = [];
      test.onTestFinished(async () => void (await Promise.all(mine.map((s) => s.stop()))));
      return startReady({ ...this.base(), ...env }, mine);
    },
    startForFile(env) {
      return startReady({ ...this.base(), ...env }, forFile);
    },
    async own(test, own = {}) {
      const api = await startStandin({ pki: pki!, ...own });
      const mine: SidecarProcess[] = [];
      test.onTestFinished(async () => {
        await Promise.all(mine.map((s) => s.stop()));
        await api.close();
      });
      return {
        standin: api,
        base: () => baseOf(api),
        start: (env) => startReady({ ...baseOf(api), ...env }, mine),
      };
    },
  };
}
