/**
 * The fixture of the limit tests (floods, slow clients, slow readers): a stand-in token endpoint
 * and a counting HTTPS upstream that share one test PKI, started in the file's beforeAll and
 * closed in its afterAll; `env()` is the sidecar configuration that points at them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll } from 'vitest';
import { createTestPki, startStandin, type Standin } from '../../src/standin/index.js';
import { readyInTests, writeTemp } from './sidecar-process.js';
import { startCountingUpstream, type CountingUpstream } from './upstream.js';

export interface LimitsFixture {
  readonly standin: Standin;
  readonly upstream: CountingUpstream;
  /** UPSTREAM_BASE_URL, TOKEN_URL, UPSTREAM_CA_FILE and the client's credentials. */
  env(): Record<string, string>;
}

export function useLimitsFixture(
  client: { clientId: string; clientSecret: string },
  answer: (req: IncomingMessage, res: ServerResponse, done: () => void) => void,
): LimitsFixture {
  let standin: Standin | undefined;
  let upstream: CountingUpstream | undefined;
  let caFile = '';
  beforeAll(async () => {
    const pki = await createTestPki();
    standin = await startStandin({ pki, ...client });
    upstream = await startCountingUpstream(pki, answer);
    caFile = writeTemp('ca.pem', pki.caCert);
  });
  afterAll(async () => {
    await upstream?.close();
    await standin?.close();
  });
  const ready = <T>(value: T | undefined): T => readyInTests(value, 'the fixture');
  return {
    get standin() {
      return ready(standin);
    },
    get upstream() {
      return ready(upstream);
    },
    env: () => ({
      UPSTREAM_BASE_URL: ready(upstream).url,
      TOKEN_URL: `${ready(standin).url}/oauth/token/`,
      UPSTREAM_CA_FILE: caFile,
      CLIENT_ID: client.clientId,
      CLIENT_SECRET: client.clientSecret,
    }),
  };
}
