/** Per-file fixtures of the fleet tests: one test PKI with its CA file, and cleanups run at the end. */
import { afterAll, beforeAll } from 'vitest';
import {
  createTestPki,
  startStandin,
  type Standin,
  type TestPki,
} from '../../src/standin/index.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { writeTemp } from './sidecar-process.js';

export interface FileFixtures {
  readonly pki: TestPki;
  /** The PKI's CA as a file, for UPSTREAM_CA_FILE. */
  readonly caFile: string;
  /** Run `fn` after the file's last test (all together, failures ignored). */
  cleanup(fn: () => Promise<unknown>): void;
  /** A redis-server and a stand-in of its own for one scenario, closed after the file. */
  redisAndStandin(client: {
    clientId: string;
    clientSecret: string;
    tokenLifetimeSeconds: number;
  }): Promise<{ redis: RedisServer; standin: Standin }>;
}

/** Registers the file's beforeAll/afterAll; read `pki` and `caFile` from tests and hooks. */
export function useFileFixtures(): FileFixtures {
  let pki: TestPki | undefined;
  let caFile: string | undefined;
  const cleanups: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    pki = await createTestPki();
    caFile = writeTemp('ca.pem', pki.caCert);
  });
  afterAll(async () => {
    await Promise.allSettled(cleanups.splice(0).map((fn) => fn()));
  });
  return {
    get pki() {
      if (pki === undefined) throw new Error('fixtures are ready in tests and hooks only');
      return pki;
    },
    get caFile() {
      if (caFile === undefined) throw new Error('fixtures are ready in tests and hooks only');
      return caFile;
    },
    cleanup: (fn) => void cleanups.push(fn),
    async redisAndStandin(client) {
      const redis = await startRedisServer();
      cleanups.push(() => redis.close());
      const standin = await startStandin({ pki: this.pki, ...client });
      cleanups.push(() => standin.close());
      return { redis, standin };
    },
  };
}
