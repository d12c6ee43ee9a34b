/**
 * What a request under a rate limit costs the store, counted (docs/capacity.md): one real sidecar
 * process, one real redis-server, the HTTPS stand-in. Commands are counted with INFO commandstats,
 * never timed. The model's figures: at most one store operation (the quota script) per request
 * admitted under a rate limit, and no quota or cooldown read while the member is idle (only the
 * connection's health PING).
 */
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, startStandin, type Standin } from '../src/standin/index.js';
import { startRedisServer, type RedisServer } from './helpers/redis-server.js';
import {
  startSidecarProcess,
  waitFor,
  waitReady,
  writeTemp,
  type SidecarProcess,
} from './helpers/sidecar-process.js';

/** docs/capacity.md "The model": store operations per request admitted under a rate limit. */
const MODEL_OPS_PER_LIMITED_REQUEST = 1;

let standin: Standin;
let redis: RedisServer;
let caFile: string;
const client = new Agent({ connections: 4 });

beforeAll(async () => {
  const pki = await createTestPki();
  standin = await startStandin({ pki });
  caFile = writeTemp('ca.pem', pki.caCert);
  redis = await startRedisServer();
});

afterAll(async () => {
  await client?.close();
  await redis?.close(); // undefined when redis-server is missing: its own error says so
  await standin?.close();
});

/** Calls per command name so far (INFO commandstats), INFO itself left out. */
async function commandCalls(): Promise<Map<string, number>> {
  const text = await redis.command('INFO', 'commandstats');
  const calls = new Map<string, number>();
  for (const m of text.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)) {
    if (m[1] !== 'info') calls.set(m[1]!, Number(m[2]));
  }
  return calls;
}

/** The round trips a client sent between two counts: scripts and PING (the sidecar sends no other). */
function sent(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const name of ['evalsha', 'eval', 'ping']) {
    out[name] = (after.get(name) ?? 0) - (before.get(name) ?? 0);
  }
  return out;
}

async function start(env: Record<string, string>, prefix: string): Promise<SidecarProcess> {
  const sidecar = await startSidecarProcess({
    UPSTREAM_BASE_URL: standin.url,
    UPSTREAM_CA_FILE: caFile,
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: 'demo-secret',
    STORE_URL: redis.url,
    STORE_KEY_PREFIX: prefix,
    ...env,
  });
  await waitReady(sidecar);
  return sidecar;
}

async function get(sidecar: SidecarProcess, path: string): Promise<number> {
  const res = await request(`${sidecar.proxyUrl}${path}`, { dispatcher: client });
  await res.body.dump();
  return res.statusCode;
}

describe('store commands per request (INFO commandstats on a real redis-server)', () => {
  it('under a rate limit: at most one store operation per request, no cooldown poll while idle', async () => {
    const sidecar = await start({ UPSTREAM_RATE_LIMIT: '1000/s' }, 'capacity-a:');
    try {
      // Settled: the first admission and the start-up reads are behind us.
      expect(await get(sidecar, '/v1.0/contracts?warm')).toBe(200);
      const requests = 40;
      const before = await commandCalls();
      for (let i = 0; i < requests; i++)
        expect(await get(sidecar, `/v1.0/contracts?i=${i}`)).toBe(200);
      const during = sent(before, await commandCalls());
      const scripts = during.evalsha! + during.eval!;
      expect(scripts).toBeGreaterThan(0);
      expect(scripts).toBeLessThanOrEqual(requests * MODEL_OPS_PER_LIMITED_REQUEST);

      // Idle: until the connection's health check has run twice (every 2 s; a real clock, hence
      // waitFor with a generous bound), nothing but PING reaches the store. The old 250 ms poll
      // would have sent at least 8 reads of the cooldown by then.
      const idle = await commandCalls();
      let now = sent(idle, idle);
      await waitFor(
        async () => {
          now = sent(idle, await commandCalls());
          return now.ping! >= 2;
        },
        30_000,
        'two health PINGs',
      );
      expect(now.evalsha! + now.eval!).toBe(0);
    } finally {
      await sidecar.stop();
    }
  });
});
