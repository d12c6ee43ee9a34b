/**
 * Hooks for a test file that puts handlers on real HTTPS servers on 127.0.0.1, port 0 (one test
 * PKI for the file, one client agent trusting it), and closes each server after its test.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { createTestPki } from '../../src/standin/pki.js';
import type { TestPki } from '../../src/standin/types.js';
import { startCountingUpstream, type CountingUpstream } from './upstream.js';

export interface HttpsServers {
  /** A server answering with `answer` (which calls `done` once the answer is over). */
  start(
    answer: (req: IncomingMessage, res: ServerResponse, done: () => void) => void,
  ): Promise<CountingUpstream>;
  /** The client trusting the file's PKI. */
  agent(): Agent;
  /** The servers of the running test, in the order they started. */
  readonly opened: readonly CountingUpstream[];
}

export function useHttpsServers(): HttpsServers {
  let pki: TestPki;
  let agent: Agent;
  const opened: CountingUpstream[] = [];
  beforeAll(async () => {
    pki = await createTestPki();
    agent = new Agent({ connect: { ca: pki.caCert } });
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((upstream) => upstream.close()));
  });
  afterAll(() => agent.close());
  return {
    async start(answer) {
      const upstream = await startCountingUpstream(pki, answer);
      opened.push(upstream);
      return upstream;
    },
    agent: () => agent,
    opened,
  };
}
