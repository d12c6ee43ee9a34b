/**
 * End-to-end: a token endpoint's `Retry-After` is waited from when its answer arrived, whatever
 * the answer's `Date` says (docs/quota-guard.md "When a wait counts from"). A real `oauth-sidecar`
 * process (the bundle) against the real stand-in over HTTPS, one pair per case, run at once: the
 * first token request gets 503 `Retry-After: 2`, the next one succeeds. The gap between the two
 * requests as the stand-in saw them is the wait.
 */
import { describe, expect, it } from 'vitest';
import { startStandin } from '../src/standin/index.js';
import * as processes from './helpers/sidecar-process.js';

const CLIENT_ID = 'retry-after-client';
const SECRET = 'retry-after-secret';

async function tokenRetryGap(dateOffsetMs: number | null, age?: string): Promise<number> {
  const standin = await startStandin({ clientId: CLIENT_ID, clientSecret: SECRET });
  standin.failTokenRequests(
    { kind: 'status', status: 503, retryAfter: '2', dateOffsetMs, ...(age && { age }) },
    1,
  );
  let sidecar: processes.SidecarProcess | undefined;
  try {
    sidecar = await processes.startSidecarProcess({
      UPSTREAM_BASE_URL: standin.url,
      UPSTREAM_CA_FILE: processes.writeTemp('ca.pem', standin.caCert),
      CLIENT_ID,
      CLIENT_SECRET: SECRET,
    });
    await processes.waitReady(sidecar, 15_000);
    const [failed, next] = standin.tokenRequests;
    expect(failed?.outcome).toBe('fault');
    expect(next).toBeDefined();
    return next!.at - failed!.at;
  } finally {
    await sidecar?.stop('SIGKILL');
    await standin.close();
  }
}

describe.concurrent(
  'the token keeper waits out Retry-After: 2 from arrival',
  { timeout: 30_000 },
  () => {
    it('with a normal Date (stamped 0.9 s before the answer left): at least 2 s', async () => {
      expect(await tokenRetryGap(-900)).toBeGreaterThanOrEqual(2000);
    });

    it('with a Date 60 s behind: at least 2 s', async () => {
      expect(await tokenRetryGap(-60_000)).toBeGreaterThanOrEqual(2000);
    });

    it('with a Date 30 s ahead: at least 2 s, not 32 s', async () => {
      const gap = await tokenRetryGap(30_000);
      expect(gap).toBeGreaterThanOrEqual(2000);
      expect(gap).toBeLessThan(4000);
    });

    it('without a Date: at least 2 s', async () => {
      expect(await tokenRetryGap(null)).toBeGreaterThanOrEqual(2000);
    });

    it('with Age: 1 the wait is 1 s shorter (a cache held the answer that long)', async () => {
      const gap = await tokenRetryGap(0, '1');
      expect(gap).toBeGreaterThanOrEqual(1000);
      expect(gap).toBeLessThan(2000);
    });
  },
);
