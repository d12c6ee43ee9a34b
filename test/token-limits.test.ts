/**
 * End-to-end: the token keeper's limits (docs/design.md "Token keeper") in the real
 * `oauth-sidecar` process against a stand-in token endpoint that misbehaves: lifetimes past Node's
 * timer maximum, `expiresIn: 0`, an access token with CR/LF, and a client-secret file replaced by a
 * FIFO. Whatever it answers, at most 10 token requests in any 10 s, and serving again once fixed.
 */
import { execFileSync } from 'node:child_process';
import { unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import {
  startSidecarProcess,
  tempDir,
  waitFor,
  waitReady,
  type SidecarProcess,
  useStandin,
} from './helpers/sidecar-process.js';
import { realClock } from './helpers/wait.js';
import { busiestWindow } from './helpers/windows.js';

const SECRET = 'limits-secret';
const api = useStandin({ clientId: 'limits-client', clientSecret: SECRET });
let sidecar: SidecarProcess | undefined;

afterEach(async () => {
  await sidecar?.stop('SIGKILL');
  sidecar = undefined;
  api.standin.clearTokenFaults();
  api.standin.setTokenLifetime(1799);
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  return {
    UPSTREAM_BASE_URL: api.standin.url,
    UPSTREAM_CA_FILE: api.caFile,
    CLIENT_ID: 'limits-client',
    CLIENT_SECRET: SECRET,
    TOKEN_WAIT_MS: '300',
    ...extra,
  };
}

/** Token requests the stand-in received since `since` (ms since the epoch). */
const tokenRequestsSince = (since: number) =>
  api.standin.tokenRequests.filter((r) => r.at >= since);

/** The most token requests in any 10-second window since `since`. */
const busiestSince = (since: number): number =>
  busiestWindow(tokenRequestsSince(since).map((r) => r.at));

async function proxied(): Promise<{ status: number; code?: string; retryAfter?: string }> {
  const res = await request(`${sidecar!.proxyUrl}/v1.0/contracts/`);
  const body = (await res.body.json()) as { errors?: { code: string }[] };
  const retryAfter = res.headers['retry-after'];
  return {
    status: res.statusCode,
    ...(body.errors?.[0] && { code: body.errors[0].code }),
    ...(typeof retryAfter === 'string' && { retryAfter }),
  };
}

async function status(): Promise<{
  token: { lastError: { kind: string; message: string } | null; requestInFlight: boolean };
}> {
  const res = await request(`${sidecar!.adminUrl}/status`);
  return (await res.body.json()) as Awaited<ReturnType<typeof status>>;
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

describe('token keeper limits, end to end', () => {
  it('a 40-day lifetime: one token request, no timer overflow', async () => {
    api.standin.setTokenLifetime(40 * 86_400);
    const since = Date.now();
    sidecar = await startSidecarProcess(env());
    await waitReady(sidecar);
    // The keeper logs the renewal it schedules just after /ready turns: wait for the line itself.
    await waitFor(
      () => !Number.isNaN(nextRenewalAt(sidecar!)),
      10_000,
      'the nextRenewalAt log line',
    );
    // The renewal is scheduled weeks ahead (an overflowing timer fires after 1 ms and renews at once).
    expect(nextRenewalAt(sidecar) - Date.now()).toBeGreaterThan(30 * 86_400_000);
    expect((await proxied()).status).toBe(200);
    expect(tokenRequestsSince(since)).toHaveLength(1);
    expect(sidecar.stderr.join('')).not.toContain('TimeoutOverflowWarning');
  });

  it('Retry-After: 3000000 on a 503 with no token yet: no timer overflow, one request, the next within 8 s', async () => {
    api.standin.failTokenRequests(
      { kind: 'status', status: 503, retryAfter: '3000000' },
      Number.POSITIVE_INFINITY,
    );
    const since = Date.now();
    sidecar = await startSidecarProcess(env());
    await waitFor(async () => (await status()).token.lastError !== null, 30_000, 'a token error');
    expect(tokenRequestsSince(since)).toHaveLength(1);
    const answer = await proxied();
    expect(answer).toMatchObject({ status: 503, code: 'token_unavailable' });
    // Not serving: capped at 8 s (3600 s only while a valid token is held).
    expect(Number(answer.retryAfter)).toBeLessThanOrEqual(8);
    expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(sidecar.stderr.join('')).not.toContain('TimeoutOverflowWarning');
  });

  it('expiresIn: 0: callers get 503 token_unavailable, no expired token goes upstream, ≤ 10 token requests per 10 s', async () => {
    api.standin.setTokenLifetime(0);
    const since = Date.now();
    const apiBefore = api.standin.apiRequests.length;
    sidecar = await startSidecarProcess(env());
    const answers: Awaited<ReturnType<typeof proxied>>[] = [];
    // Rounds of 10 callers until the keeper asked the endpoint again (its expired tokens are
    // dropped): the count, not the time, ends the load.
    while (answers.length < 60 || tokenRequestsSince(since).length < 2) {
      answers.push(...(await Promise.all(Array.from({ length: 10 }, () => proxied()))));
      expect(answers.length).toBeLessThan(100_000);
    }
    for (const answer of answers) {
      expect(answer).toMatchObject({ status: 503, code: 'token_unavailable' });
      expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    expect(api.standin.apiRequests.length).toBe(apiBefore);
    expect(busiestSince(since)).toBeLessThanOrEqual(10);
  });

  it('an access token with CR/LF is a malformed answer: not ready, 503s, ≤ 10 per 10 s, serving again once fixed', async () => {
    api.standin.failTokenRequests(
      { kind: 'access-token', value: 'looks-fine\r\nX-Injected: 1' },
      Number.POSITIVE_INFINITY,
    );
    const since = Date.now();
    sidecar = await startSidecarProcess(env());
    await waitFor(async () => (await status()).token.lastError !== null, 5000, 'a token error');
    expect((await status()).token.lastError).toMatchObject({ kind: 'malformed' });
    expect((await status()).token.lastError!.message).toContain('"accessToken"');
    expect((await request(`${sidecar.adminUrl}/readyz`)).statusCode).toBe(503);
    const answer = await proxied();
    expect(answer).toMatchObject({ status: 503, code: 'token_unavailable' });
    await childClock.sleep(3000);
    expect(busiestSince(since)).toBeLessThanOrEqual(10);

    api.standin.clearTokenFaults();
    await waitFor(async () => (await proxied()).status === 200, 30_000, 'serving again');
    expect(sidecar.stdout.join('\n')).not.toContain('looks-fine');
  });

  it('a client-secret file replaced by a FIFO: a clear error, no hung request, serving again once the file is back', async () => {
    const dir = tempDir('oauth-sidecar-fifo-');
    const idFile = join(dir, 'client-id');
    const secretFile = join(dir, 'client-secret');
    writeFileSync(idFile, 'limits-client\n');
    writeFileSync(secretFile, `${SECRET}\n`);
    const { CLIENT_ID: _id, CLIENT_SECRET: _secret, ...rest } = env();
    sidecar = await startSidecarProcess({
      ...rest,
      CLIENT_ID_FILE: idFile,
      CLIENT_SECRET_FILE: secretFile,
    });
    await waitReady(sidecar);

    unlinkSync(secretFile);
    execFileSync('mkfifo', [secretFile]);
    // Everything the sidecar holds dies: the 401 forces a renewal, the refresh grant is rejected,
    // and client credentials must be read from the FIFO.
    api.standin.revokeAccessTokens();
    api.standin.revokeRefreshTokens();
    expect(await proxied()).toMatchObject({ status: 503, code: 'token_unavailable' });
    await waitFor(
      async () => (await status()).token.lastError?.kind === 'credentials',
      5000,
      'a credentials error',
    );
    const token = (await status()).token;
    expect(token.lastError!.message).toContain('FIFO');
    expect(token.requestInFlight).toBe(false);
    expect((await request(`${sidecar.adminUrl}/healthz`)).statusCode).toBe(200);
    expect(sidecar.stdout.join('\n')).toContain('FIFO');

    unlinkSync(secretFile);
    writeFileSync(secretFile, `${SECRET}\n`);
    await waitFor(async () => (await proxied()).status === 200, 30_000, 'serving again');
  });
});
