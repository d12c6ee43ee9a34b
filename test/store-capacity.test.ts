/**
 * What a request under a rate limit costs the store, counted (docs/capacity.md): one real sidecar
 * process, one real redis-server, the HTTPS stand-in. Script calls are counted from the server's
 * MONITOR stream, never timed: INFO commandstats (which bench/capacity.mjs uses) cannot tell the
 * health check's script from the quota's, and the health check is a script. The model's figures: at most one store operation (the quota script) per request
 * admitted under a rate limit, and no quota or cooldown read while the member is idle (only the
 * connection's health check script).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
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

/** The health check's script (src/fleet/clients.ts): the one script an idle member sends. */
const HEALTH_SHA1 = createHash('sha1').update("return 'PONG'").digest('hex');

/** Every script call the redis-server sees from now on (MONITOR), health checks told apart. */
async function watchScripts(url: string): Promise<{
  health(): number;
  others(): string[];
  stop(): void;
}> {
  const port = new URL(url).port;
  const child = spawn('redis-cli', ['-p', port, 'monitor'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  const scripts = (): string[] =>
    text.split('\n').filter((line) => /\] "(evalsha|eval)" /i.test(line));
  const isHealth = (line: string): boolean =>
    line.includes(HEALTH_SHA1) || line.includes("return 'PONG'");
  await waitFor(() => text.startsWith('OK'), 10_000, 'MONITOR to start');
  return {
    health: () => scripts().filter(isHealth).length,
    others: () => scripts().filter((line) => !isHealth(line)),
    stop: () => void child.kill(),
  };
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
      const during = await watchScripts(redis.url);
      try {
        for (let i = 0; i < requests; i++)
          expect(await get(sidecar, `/v1.0/contracts?i=${i}`)).toBe(200);
        // The last script a request sent has been seen once a later command is: ask for one.
        await redis.command('PING');
        await waitFor(() => during.others().length > 0, 10_000, 'the quota scripts');
        expect(during.others().length).toBeLessThanOrEqual(
          requests * MODEL_OPS_PER_LIMITED_REQUEST,
        );
      } finally {
        during.stop();
      }

      // Idle: until the connection's health check has run twice (every 2 s; a real clock, hence
      // waitFor with a generous bound), no script but the health check reaches the store. The old
      // 250 ms poll would have sent at least 8 reads of the cooldown by then.
      const idle = await watchScripts(redis.url);
      try {
        await waitFor(() => idle.health() >= 2, 30_000, 'two health checks');
        expect(idle.others()).toEqual([]);
      } finally {
        idle.stop();
      }
    } finally {
      await sidecar.stop();
    }
  });
});
