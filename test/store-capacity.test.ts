/**
 * What a request under a rate limit costs the store, counted (docs/capacity.md): one real sidecar
 * process, one real redis-server, the HTTPS stand-in. Script calls are counted from the server's
 * MONITOR stream, never timed: INFO commandstats (which bench/capacity.mjs uses) cannot tell the
 * health check's script from the quota's, and the health check is a script. The model's figures:
 * at most one store operation (the quota script) per two requests admitted under a rate limit far
 * above the load, and no quota or cooldown read while the member is idle (only the connection's
 * health check script).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { Agent, request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { useStandinFleet } from './helpers/standin-fleet.js';
import type { SidecarProcess } from './helpers/sidecar-process.js';
import { waitFor } from './helpers/wait.js';

/**
 * docs/capacity.md "The model": store operations per request admitted under a rate limit far above
 * the load. A caller's requests are admitted from leased batches: one store decision per lease
 * window (500 ms) while it is busy, after a ramp of one decision per doubling of its batch. 40
 * back-to-back requests come far faster than 2 per window even on a loaded machine (each is one
 * loopback round trip), so at most half of them cost a decision; without leases each did.
 */
const MODEL_OPS_PER_LIMITED_REQUEST = 0.5;

const fleet = useStandinFleet({ redis: true });
const client = new Agent({ connections: 4 });

afterAll(async () => {
  await client?.close();
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

/**
 * The health check 200 ms apart instead of 2 s: the five the idle look below waits for span at
 * least 800 ms, in which a 250 ms poll of the cooldown would have sent at least 3 reads.
 */
const HEALTH_CHECK_INTERVAL_MS = 200;

function start(env: Record<string, string>, prefix: string): Promise<SidecarProcess> {
  return fleet.start({
    STORE_URL: fleet.redis.url,
    STORE_KEY_PREFIX: prefix,
    STORE_HEALTH_CHECK_INTERVAL_MS: String(HEALTH_CHECK_INTERVAL_MS),
    ...env,
  });
}

async function get(sidecar: SidecarProcess, path: string): Promise<number> {
  const res = await request(`${sidecar.proxyUrl}${path}`, { dispatcher: client });
  await res.body.dump();
  return res.statusCode;
}

describe('store commands per request (INFO commandstats on a real redis-server)', () => {
  it('under a rate limit: leased batches, at most one store operation per two requests; no cooldown poll while idle', async () => {
    // Stopped by the fleet helper after the test.
    const sidecar = await start({ UPSTREAM_RATE_LIMIT: '1000/s' }, 'capacity-a:');
    // Settled: the first admission and the start-up reads are behind us.
    expect(await get(sidecar, '/v1.0/contracts?warm')).toBe(200);
    const requests = 40;
    const during = await watchScripts(fleet.redis.url);
    try {
      for (let i = 0; i < requests; i++)
        expect(await get(sidecar, `/v1.0/contracts?i=${i}`)).toBe(200);
      // The last script a request sent has been seen once a later command is: ask for one.
      await fleet.redis.command('PING');
      await waitFor(() => during.others().length > 0, 10_000, 'the quota scripts');
      expect(during.others().length).toBeLessThanOrEqual(requests * MODEL_OPS_PER_LIMITED_REQUEST);
    } finally {
      during.stop();
    }

    // Idle: until the connection's health check has run five times (a real clock, hence waitFor
    // with a generous bound), no script but the health check reaches the store.
    const idle = await watchScripts(fleet.redis.url);
    try {
      await waitFor(() => idle.health() >= 5, 30_000, 'five health checks');
      expect(idle.others()).toEqual([]);
    } finally {
      idle.stop();
    }
  });
});
