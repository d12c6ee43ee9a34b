/**
 * Stale answers (RFC 5861, docs/response-cache.md "Stale answers") through the real request path:
 * sidecar processes (the bundle) in front of the HTTPS stand-in, which is put into maintenance
 * (503 for a path), loses its token endpoint, or answers slowly. The tests run side by side; one
 * that puts the stand-in into maintenance or takes its token endpoint down has a stand-in of its own.
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import type { Standin } from '../src/standin/index.js';
import { useStandinFleet } from './helpers/standin-fleet.js';
import { metricValue, waitFor, type SidecarProcess } from './helpers/sidecar-process.js';

const fleet = useStandinFleet();

async function get(sidecar: SidecarProcess, path: string) {
  const res = await request(`${sidecar.proxyUrl}${path}`);
  const body = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body };
}

function asked(path: string, standin: Standin = fleet.standin): number {
  return standin.apiRequests.filter((r) => r.url === path).length;
}

/** Ask until the answer is a stale one (the entry's second of freshness is over). */
async function untilStale(sidecar: SidecarProcess, path: string) {
  let last: Awaited<ReturnType<typeof get>> | undefined;
  await waitFor(
    async () => {
      last = await get(sidecar, path);
      return /ttl=-/.test(String(last.headers['cache-status']));
    },
    10_000,
    `a stale answer for ${path}`,
  );
  return last!;
}

// Side by side on a loaded 2-core machine each test waits longer for its processes: a limit for
// hangs, never asserted.
describe.concurrent('stale answers through the sidecar', { timeout: 60_000 }, () => {
  it('a 503 maintenance answer is replaced by the stale entry, marked, counted; a cooldown too', async (test) => {
    const api = await fleet.own(test);
    const sidecar = await api.start({ CACHE_RULES: '/v1.0/echo/=1', LOG_LEVEL: 'info' });
    const path = '/v1.0/echo/maintenance?desk=grains';
    const fresh = await get(sidecar, path);
    expect(fresh.status).toBe(200);
    api.standin.failApiRequests('/v1.0/echo/maintenance', 503);
    const stale = await untilStale(sidecar, path);
    expect(stale.status).toBe(200);
    expect(stale.body).toBe(fresh.body);
    expect(Number(stale.headers.age)).toBeGreaterThanOrEqual(1);
    expect(stale.headers['cache-status']).toMatch(
      /^oauth-sidecar; hit; ttl=-\d+; fwd=stale; fwd-status=503; detail=stale-if-error$/,
    );
    expect(await metricValue(sidecar, 'oauth_sidecar_cache_requests_total{result="stale"}')).toBe(
      1,
    );
    // A 503 with Retry-After starts the cooldown all the same; during it the stale entry
    // answers without asking the API.
    api.standin.failApiRequests('/v1.0/echo/maintenance', 503, '60');
    await get(sidecar, path);
    const before = asked(path, api.standin);
    const during = await get(sidecar, path);
    expect(during.status).toBe(200);
    expect(during.headers['cache-status']).toMatch(/; ttl=-\d+; detail=stale-if-error$/);
    expect(asked(path, api.standin)).toBe(before);
    const other = await get(sidecar, '/v1.0/echo/never-cached');
    expect(other.status).toBe(503); // nothing stale to answer with: the cooldown's own 503
  });

  it('with the token endpoint down and the token expired: a stale 200 instead of 503 token_unavailable', async (test) => {
    const api = await fleet.own(test, { tokenLifetimeSeconds: 3 });
    const sidecar = await api.start({
      CACHE_RULES: '/v1.0/echo/=1',
      TOKEN_WAIT_MS: '100',
      LOG_LEVEL: 'info',
    });
    const path = '/v1.0/echo/token-outage';
    const fresh = await get(sidecar, path);
    expect(fresh.status).toBe(200);
    api.standin.failTokenRequests({ kind: 'status', status: 503 }, Infinity);
    await waitFor(
      async () => (await request(`${sidecar.adminUrl}/readyz`)).statusCode === 503,
      15_000,
      'the token expired',
    );
    const stale = await get(sidecar, path);
    expect(stale.status).toBe(200);
    expect(stale.body).toBe(fresh.body);
    expect(stale.headers['cache-status']).toMatch(/; ttl=-\d+; detail=stale-if-error$/);
    const uncached = await get(sidecar, '/v1.0/echo/not-in-the-cache');
    expect(uncached.status).toBe(503);
    expect(uncached.body).toContain('token_unavailable');
  });

  it('past the stale-if-error window the error passes', async (test) => {
    const api = await fleet.own(test);
    const sidecar = await api.start({
      CACHE_RULES: '/v1.0/echo/=1',
      CACHE_STALE_IF_ERROR_SECONDS: '1',
      LOG_LEVEL: 'info',
    });
    const path = '/v1.0/echo/window';
    expect((await get(sidecar, path)).status).toBe(200);
    api.standin.failApiRequests(path, 503);
    const statuses: number[] = [];
    await waitFor(
      async () => {
        const answer = await get(sidecar, path);
        statuses.push(answer.status);
        return answer.status === 503;
      },
      10_000,
      'the 503 passed on',
    );
    // Fresh hits and stale answers first (200), then the error itself, never the reverse.
    expect(statuses.slice(0, -1).every((s) => s === 200)).toBe(true);
  });

  it('stale-while-revalidate answers from the stale entry and sends exactly one refresh', async (test) => {
    const sidecar = await fleet.start(
      {
        CACHE_RULES: '/v1.0/slow/=1',
        CACHE_STALE_WHILE_REVALIDATE_SECONDS: '60',
        LOG_LEVEL: 'info',
      },
      test,
    );
    const path = '/v1.0/slow/2000?swr=1';
    expect((await get(sidecar, path)).status).toBe(200); // 2 s upstream
    const hit = await get(sidecar, path);
    expect(hit.headers['cache-status']).toMatch(/; hit$/);
    await untilStale(sidecar, path);
    // The refresh takes 2 s upstream (time for a loaded machine to answer all 20 while it runs);
    // meanwhile 20 answers come from the stale entry at once.
    const answers = await Promise.all(Array.from({ length: 20 }, () => get(sidecar, path)));
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      // From the stale entry, not waiting for the refresh (how fast: a hit's speed, bench/).
      expect(String(answer.headers['cache-status'])).toMatch(/ttl=-/);
    }
    await waitFor(
      async () => /; hit$/.test(String((await get(sidecar, path)).headers['cache-status'])),
      10_000,
      'the refreshed entry',
    );
    expect(asked(path)).toBe(2); // the first fill and the one refresh
  });

  it('a stale answer costs no rate-limit slot: with the one slot of the hour spent, it still answers', async (test) => {
    const sidecar = await fleet.start(
      {
        CACHE_RULES: '/v1.0/echo/=1',
        CACHE_STALE_WHILE_REVALIDATE_SECONDS: '60',
        UPSTREAM_RATE_LIMIT: '1/h',
        UPSTREAM_QUEUE_MS: '0',
        LOG_LEVEL: 'info',
      },
      test,
    );
    const path = '/v1.0/echo/one-slot';
    expect((await get(sidecar, path)).status).toBe(200); // the hour's one slot
    const stale = await untilStale(sidecar, path);
    expect(stale.status).toBe(200);
    const more = await Promise.all(Array.from({ length: 5 }, () => get(sidecar, path)));
    expect(more.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    // The refresh found no slot (refused, not sent); a request outside the cache is refused too.
    expect(asked(path)).toBe(1);
    expect((await get(sidecar, '/v1.0/echo/uncached')).status).toBe(429);
  });
});
