/**
 * The fixture of the limit tests (floods, slow clients, slow readers): a stand-in token endpoint
 * and a counting HTTPS upstream that share one test PKI, started in the file's beforeAll and
 * closed in its afterAll; `env()` is the sidecar configuration that points at them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent, request } from 'undici';
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

/** How the normal GETs fared under an attack: each one's status (0: none in 5 s) and time. */
export interface PacedGets {
  results: { status: number; ms: number }[];
  /** How many were answered 200 within 2 s. */
  good: number;
}

/**
 * `count` normal GETs of `<proxyUrl>/v1.0/normal/<i>`, one every 500 ms, each given 5 s: what a
 * caller sees while the limit tests' attacks run.
 */
export async function pacedGets(proxyUrl: string, count: number): Promise<PacedGets> {
  const agent = new Agent({ connections: 64 });
  const results: { status: number; ms: number }[] = [];
  const pending: Promise<void>[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const started = Date.now();
      pending.push(
        request(`${proxyUrl}/v1.0/normal/${i}`, {
          dispatcher: agent,
          headersTimeout: 5_000,
          bodyTimeout: 5_000,
        }).then(
          async (res) => {
            await res.body.text();
            results.push({ status: res.statusCode, ms: Date.now() - started });
          },
          () => void results.push({ status: 0, ms: Date.now() - started }),
        ),
      );
      await new Promise((r) => setTimeout(r, 500));
    }
    await Promise.all(pending);
  } finally {
    await agent.close();
  }
  const good = results.filter((r) => r.status === 200 && r.ms < 2_000).length;
  return { results, good };
}
