/**
 * End-to-end: the token keeper's limits (docs/design.md "Token keeper") in the real
 * `oauth-sidecar` process against a stand-in token endpoint that misbehaves: lifetimes past Node's
 * timer maximum, `expiresIn: 0`, an access token with CR/LF, and a client-secret file replaced by a
 * FIFO. Whatever it answers, at most 10 token requests in any 10 s, and serving again once fixed.
 * Each test has its own stand-in and process, so the tests run side by side.
 */
import { execFileSync } from 'node:child_process';
import { unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it, type TestContext } from 'vitest';
import { startStandin, type Standin } from '../src/standin/index.js';
import { useFileFixtures } from './helpers/fixtures.js';
import {
  startSidecarProcess,
  tempDir,
  waitFor,
  waitReady,
  type SidecarProcess,
} from './helpers/sidecar-process.js';
import { realClock } from './helpers/wait.js';
import { busiestWindow } from './helpers/windows.js';

const CLIENT_ID = 'limits-client';
const SECRET = 'limits-secret';
const fixtures = useFileFixtures();

/** One test's stand-in (stopped after the test, with the process the test starts). */
class Limits {
  sidecar: SidecarProcess | undefined;

  constructor(readonly standin: Standin) {}

  /** The process's environment: this stand-in, its CA, the client, and `extra`. */
  env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      UPSTREAM_BASE_URL: this.standin.url,
      UPSTREAM_CA_FILE: fixtures.caFile,
      CLIENT_ID,
      CLIENT_SECRET: SECRET,
      TOKEN_WAIT_MS: '300',
      ...extra,
    };
  }

  async start(env: Record<string, string>): Promise<SidecarProcess> {
    this.sidecar = await startSidecarProcess(env);
    return this.sidecar;
  }

  /** Token requests the stand-in received since `since` (ms since the epoch). */
  tokenRequestsSince(since: number) {
    return this.standin.tokenRequests.filter((r) => r.at >= since);
  }

  /** The most token requests in any 10-second window since `since`. */
  busiestSince(since: number): number {
    return busiestWindow(this.tokenRequestsSince(since).map((r) => r.at));
  }

  async proxied(): Promise<{ status: number; code?: string; retryAfter?: string }> {
    const res = await request(`${this.sidecar!.proxyUrl}/v1.0/contracts/`);
    const body = (await res.body.json()) as { errors?: { code: string }[] };
    const retryAfter = res.headers['retry-after'];
    return {
      status: res.statusCode,
      ...(body.errors?.[0] && { code: body.errors[0].code }),
      ...(typeof retryAfter === 'string' && { retryAfter }),
    };
  }

  async status(): Promise<{
    token: { lastError: { kind: string; message: string } | null; requestInFlight: boolean };
  }> {
    const res = await request(`${this.sidecar!.adminUrl}/status`);
    return (await res.body.json()) as Awaited<ReturnType<Limits['status']>>;
  }
}

/** A stand-in of the test's own (tokens of `lifetimeSeconds`), closed after it with its process. */
async function limits(
  { onTestFinished }: Pick<TestContext, 'onTestFinished'>,
  lifetimeSeconds?: number,
): Promise<Limits> {
  const standin = await startStandin({
    pki: fixtures.pki,
    clientId: CLIENT_ID,
    clientSecret: SECRET,
    ...(lifetimeSeconds !== undefined && { tokenLifetimeSeconds: lifetimeSeconds }),
  });
  const test = new Limits(standin);
  onTestFinished(async () => {
    await test.sidecar?.stop('SIGKILL');
    await standin.close();
  });
  return test;
}

/** The renewal the keeper's log line (`nextRenewalAt`) schedules after its first token. */
function nextRenewalAt(s: SidecarProcess): number {
  const line = s.stdout.find((l) => l.includes('"nextRenewalAt"'));
  return Date.parse((JSON.parse(line ?? '{}') as { nextRenewalAt?: string }).nextRenewalAt ?? '');
}

/**
 * Waits that let the child's own clock run: its limiter counts token requests per 10 s of it, and
 * a child process's timers cannot be faked from here.
 */
const childClock = realClock('the sidecar process limits token requests per 10 s of its own clock');

/**
 * The recovery cap (`token.recoveryBackoffCapMs`) of the tests that wait for the keeper to serve
 * again after a fix: what they prove is the fault's handling, not the default 8 s cap, which the
 * Retry-After test keeps.
 */
const RECOVERY_CAP = { TOKEN_RECOVERY_BACKOFF_CAP_MS: '2000' };

// Side by side, the tests share the machine: each gets the time two would take one after another.
describe.concurrent('token keeper limits, end to end', { timeout: 60_000 }, () => {
  it('a 40-day lifetime: one token request, no timer overflow', async (t) => {
    const test = await limits(t, 40 * 86_400);
    const since = Date.now();
    const sidecar = await test.start(test.env());
    await waitReady(sidecar);
    // The keeper logs the renewal it schedules just after /ready turns: wait for the line itself.
    await waitFor(
      () => !Number.isNaN(nextRenewalAt(sidecar)),
      10_000,
      'the nextRenewalAt log line',
    );
    // The renewal is scheduled weeks ahead (an overflowing timer fires after 1 ms and renews at once).
    expect(nextRenewalAt(sidecar) - Date.now()).toBeGreaterThan(30 * 86_400_000);
    expect((await test.proxied()).status).toBe(200);
    expect(test.tokenRequestsSince(since)).toHaveLength(1);
    expect(sidecar.stderr.join('')).not.toContain('TimeoutOverflowWarning');
  });

  it('Retry-After: 3000000 on a 503 with no token yet: no timer overflow, one request, the next within 8 s', async (t) => {
    const test = await limits(t);
    test.standin.failTokenRequests(
      { kind: 'status', status: 503, retryAfter: '3000000' },
      Number.POSITIVE_INFINITY,
    );
    const since = Date.now();
    const sidecar = await test.start(test.env());
    await waitFor(
      async () => (await test.status()).token.lastError !== null,
      30_000,
      'a token error',
    );
    expect(test.tokenRequestsSince(since)).toHaveLength(1);
    const answer = await test.proxied();
    expect(answer).toMatchObject({ status: 503, code: 'token_unavailable' });
    // Not serving: capped at 8 s, the default recovery cap (3600 s only while a valid token is held).
    expect(Number(answer.retryAfter)).toBeLessThanOrEqual(8);
    expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(sidecar.stderr.join('')).not.toContain('TimeoutOverflowWarning');
  });

  it('expiresIn: 0: callers get 503 token_unavailable, no expired token goes upstream, ≤ 10 token requests per 10 s', async (t) => {
    const test = await limits(t, 0);
    const since = Date.now();
    await test.start(test.env());
    const answers: Awaited<ReturnType<Limits['proxied']>>[] = [];
    // Rounds of 10 callers until the keeper asked the endpoint again (its expired tokens are
    // dropped): the count, not the time, ends the load.
    while (answers.length < 60 || test.tokenRequestsSince(since).length < 2) {
      answers.push(...(await Promise.all(Array.from({ length: 10 }, () => test.proxied()))));
      expect(answers.length).toBeLessThan(100_000);
    }
    for (const answer of answers) {
      expect(answer).toMatchObject({ status: 503, code: 'token_unavailable' });
      expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    expect(test.standin.apiRequests).toHaveLength(0);
    expect(test.busiestSince(since)).toBeLessThanOrEqual(10);
  });

  it('an access token with CR/LF is a malformed answer: not ready, 503s, ≤ 10 per 10 s, serving again once fixed', async (t) => {
    const test = await limits(t);
    test.standin.failTokenRequests(
      { kind: 'access-token', value: 'looks-fine\r\nX-Injected: 1' },
      Number.POSITIVE_INFINITY,
    );
    const since = Date.now();
    const sidecar = await test.start(test.env(RECOVERY_CAP));
    await waitFor(
      async () => (await test.status()).token.lastError !== null,
      5000,
      'a token error',
    );
    expect((await test.status()).token.lastError).toMatchObject({ kind: 'malformed' });
    expect((await test.status()).token.lastError!.message).toContain('"accessToken"');
    expect((await request(`${sidecar.adminUrl}/readyz`)).statusCode).toBe(503);
    const answer = await test.proxied();
    expect(answer).toMatchObject({ status: 503, code: 'token_unavailable' });
    await childClock.sleep(3000);
    expect(test.busiestSince(since)).toBeLessThanOrEqual(10);

    test.standin.clearTokenFaults();
    await waitFor(async () => (await test.proxied()).status === 200, 30_000, 'serving again');
    expect(sidecar.stdout.join('\n')).not.toContain('looks-fine');
  });

  it('a client-secret file replaced by a FIFO: a clear error, no hung request, serving again once the file is back', async (t) => {
    const test = await limits(t);
    const dir = tempDir('oauth-sidecar-fifo-');
    const idFile = join(dir, 'client-id');
    const secretFile = join(dir, 'client-secret');
    writeFileSync(idFile, `${CLIENT_ID}\n`);
    writeFileSync(secretFile, `${SECRET}\n`);
    const { CLIENT_ID: _id, CLIENT_SECRET: _secret, ...rest } = test.env(RECOVERY_CAP);
    const sidecar = await test.start({
      ...rest,
      CLIENT_ID_FILE: idFile,
      CLIENT_SECRET_FILE: secretFile,
    });
    await waitReady(sidecar);

    unlinkSync(secretFile);
    execFileSync('mkfifo', [secretFile]);
    // Everything the sidecar holds dies: the 401 forces a renewal, the refresh grant is rejected,
    // and client credentials must be read from the FIFO.
    test.standin.revokeAccessTokens();
    test.standin.revokeRefreshTokens();
    expect(await test.proxied()).toMatchObject({ status: 503, code: 'token_unavailable' });
    await waitFor(
      async () => (await test.status()).token.lastError?.kind === 'credentials',
      5000,
      'a credentials error',
    );
    expect((await test.status()).token.lastError!.message).toContain('FIFO');
    // No hung request: the keeper's retries fail at the FIFO at once, so between them none is in
    // flight (a look during one of them, which a loaded machine can stretch, is not a hang).
    await waitFor(
      async () => !(await test.status()).token.requestInFlight,
      5000,
      'no token request in flight',
    );
    expect((await request(`${sidecar.adminUrl}/healthz`)).statusCode).toBe(200);
    expect(sidecar.stdout.join('\n')).toContain('FIFO');

    unlinkSync(secretFile);
    writeFileSync(secretFile, `${SECRET}\n`);
    await waitFor(async () => (await test.proxied()).status === 200, 30_000, 'serving again');
  });
});
