/**
 * The real keeper with the real token client against the real stand-in over HTTPS, in real time
 * (3 s token lifetimes, so renewals happen within a test). Each test has its own stand-in and
 * keeper, so the tests run side by side: the file takes about as long as its slowest test.
 */
import { createMetricsRegistry } from '../src/telemetry/exposition.js';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { systemClock } from '../src/clock.js';
import { TokenUnavailableError } from '../src/errors.js';
import type { AccessTokenSource } from '../src/proxy/types.js';
import { createTestPki, startStandin, type Standin, type TestPki } from '../src/standin/index.js';
import { createLogger } from '../src/telemetry/logger.js';
import { createMetrics, type TokenGaugeSource } from '../src/telemetry/metrics.js';
import { createTokenEndpointClient } from '../src/token/client.js';
import { TokenKeeper } from '../src/token/keeper.js';
import type { ClientCredentials } from '../src/token/types.js';
import { realClock, waitFor } from './helpers/wait.js';

const CLIENT_ID = 'demo-client';
const SECRET = 'integration-secret-1';
const ROTATED = 'integration-secret-2';

let pki: TestPki;
let agent: Agent;

interface Harness {
  standin: Standin;
  keeper: TokenKeeper;
  credentials: ClientCredentials;
  lines: string[];
}

beforeAll(async () => {
  pki = await createTestPki();
  agent = new Agent({ connect: { ca: pki.caCert } });
});

afterAll(async () => {
  await agent.close();
});

/**
 * A stand-in and a keeper for the calling test, stopped after it (the test context's hook: the
 * tests run concurrently), where every log line is checked for secrets.
 */
async function setup(
  { onTestFinished }: Pick<TestContext, 'onTestFinished'>,
  options: { lifetime?: number; waitMs?: number; recoveryBackoffCapMs?: number } = {},
): Promise<Harness> {
  const standin = await startStandin({
    pki,
    clientId: CLIENT_ID,
    clientSecret: SECRET,
    tokenLifetimeSeconds: options.lifetime ?? 3,
  });
  const lines: string[] = [];
  const logger = createLogger({
    level: 'trace',
    destination: { write: (line: string) => void lines.push(line) },
  });
  const credentials = { clientId: CLIENT_ID, clientSecret: SECRET };
  const keeper = new TokenKeeper({
    endpoint: createTokenEndpointClient({
      url: `${standin.url}/oauth/token/`,
      format: 'json',
      clientAuth: 'body',
      scopes: [],
      timeoutMs: 5000,
      dispatcher: agent,
    }),
    readCredentials: () => Promise.resolve({ ...credentials }),
    settings: {
      waitMs: options.waitMs ?? 3000,
      refreshMarginSeconds: 60,
      refreshFraction: 0.2,
      recoveryBackoffCapMs: options.recoveryBackoffCapMs,
    },
    clock: systemClock,
    random: () => 0.5,
    logger,
    metrics: createMetrics({
      registry: createMetricsRegistry(),
      defaultMetrics: false,
    }),
  });
  onTestFinished(async () => {
    keeper.stop();
    // Nothing the stand-in issued, and neither secret, ever reaches a log line.
    const secrets = [...standin.issuedTokens(), SECRET, ROTATED];
    expect(secrets.length).toBeGreaterThan(2);
    for (const line of lines) {
      for (const secret of secrets) expect(line).not.toContain(secret);
    }
    await standin.close();
  });
  return { standin, keeper, credentials, lines };
}

/** The stand-in issues real 3 s tokens and judges them on its own clock (Date.now()). */
const tokens = realClock('the stand-in’s 3 s tokens expire on the wall clock it judges them by');

async function callApi(standin: Standin, token: string): Promise<number> {
  const res = await request(`${standin.url}/v1.0/contracts/`, {
    dispatcher: agent,
    headers: { accept: 'application/json', authorization: `Bearer ${token}` },
  });
  await res.body.dump();
  return res.statusCode;
}

const grants = (standin: Standin) => standin.tokenRequests.map((r) => r.grant);

describe.concurrent('token keeper against the stand-in', () => {
  it('renews a 3 s token before it expires; API calls keep succeeding', async (t) => {
    const { keeper, standin } = await setup(t);
    // The proxy and the gauges see the keeper only through these interfaces.
    const source: AccessTokenSource = keeper;
    const gauges: TokenGaugeSource = keeper;
    expect(gauges.status().ready).toBe(false);
    keeper.start();
    await keeper.whenReady();
    expect(gauges.status().ready).toBe(true);
    const statuses: number[] = [];
    // API calls until two renewals have landed (a condition, bounded), paced at 100 ms.
    const until = Date.now() + 10_000;
    while (standin.tokenRequests.length < 3 && Date.now() < until) {
      statuses.push(await callApi(standin, await source.getAccessToken()));
      await tokens.sleep(100);
    }
    expect(new Set(statuses)).toEqual(new Set([200]));
    const records = standin.tokenRequests;
    expect(records.length).toBeGreaterThanOrEqual(3);
    expect(records.every((r) => r.outcome === 'issued')).toBe(true);
    expect(grants(standin)[0]).toBe('client_credentials');
    expect(
      grants(standin)
        .slice(1)
        .every((g) => g === 'refresh_token'),
    ).toBe(true);
    // Renewed at half the lifetime (the 60 s margin is capped by it), well before expiry.
    for (let i = 1; i < records.length; i++) {
      const gap = records[i]!.at - records[i - 1]!.at;
      expect(gap).toBeGreaterThan(1000);
      expect(gap).toBeLessThan(2500);
    }
  });

  it('a null refresh token makes the next renewal use client credentials', async (t) => {
    const { keeper, standin } = await setup(t);
    standin.nullRefreshTokenNext(1);
    keeper.start();
    await keeper.whenReady();
    expect(keeper.status().refreshTokenHeld).toBe(false);
    await waitFor(() => standin.tokenRequests.length >= 3);
    expect(grants(standin).slice(0, 3)).toEqual([
      'client_credentials',
      'client_credentials',
      'refresh_token',
    ]);
  });

  it('a rejected refresh token falls back to client credentials at once', async (t) => {
    const { keeper, standin } = await setup(t);
    keeper.start();
    await keeper.whenReady();
    standin.revokeRefreshTokens();
    await waitFor(() => standin.tokenRequests.length >= 3);
    const [, refresh, fallback] = standin.tokenRequests;
    expect(refresh).toMatchObject({ grant: 'refresh_token', outcome: 'rejected' });
    expect(fallback).toMatchObject({ grant: 'client_credentials', outcome: 'issued' });
    expect(fallback!.at - refresh!.at).toBeLessThan(500);
    expect(await callApi(standin, await keeper.getAccessToken())).toBe(200);
  });

  it('picks up a rotated secret on the next client-credentials grant', async (t) => {
    const { keeper, standin, credentials, lines } = await setup(t);
    standin.nullRefreshTokenNext(10);
    keeper.start();
    await keeper.whenReady();
    // The API rotates first; the mounted secret file follows a moment later.
    standin.setClientSecret(ROTATED);
    await waitFor(() => standin.tokenRequests.length >= 2);
    expect(standin.tokenRequests[1]).toMatchObject({ secretOk: false, outcome: 'rejected' });
    credentials.clientSecret = ROTATED;
    await waitFor(() => standin.tokenRequests.some((r, i) => i > 1 && r.outcome === 'issued'));
    const accepted = standin.tokenRequests.find((r, i) => i > 1 && r.outcome === 'issued');
    expect(accepted).toMatchObject({ grant: 'client_credentials', secretOk: true });
    expect(await callApi(standin, await keeper.getAccessToken())).toBe(200);
    // Noticing the change is the credentials reader's (main.ts wires its onChange; test/cli.test.ts).
    expect(lines.some((l) => l.includes('client credentials changed'))).toBe(false);
  });

  it('50 concurrent callers at expiry share exactly one token request', async (t) => {
    const { keeper, standin } = await setup(t);
    keeper.start();
    await keeper.whenReady();
    // The renewal (at 1.5 s) is answered only after the token has expired (at 3 s).
    standin.failTokenRequests({ kind: 'delay', ms: 2500 }, 1);
    await waitFor(() => !keeper.status().ready, 5000);
    expect(keeper.status().requestInFlight).toBe(true);
    const callers = Array.from({ length: 50 }, () => keeper.getAccessToken());
    const tokens = await Promise.all(callers);
    expect(new Set(tokens).size).toBe(1);
    expect(standin.tokenRequests).toHaveLength(2);
    expect(await callApi(standin, tokens[0]!)).toBe(200);
  });

  it('backs off during an outage, answers 503 material, then recovers', async (t) => {
    // A 4 s recovery cap: above the steps asserted (0.5, 1, 2 s), and the wait after the fourth
    // failure, once the token is gone, is 2 s instead of the default cap's 4 s.
    const { keeper, standin } = await setup(t, { waitMs: 1000, recoveryBackoffCapMs: 4_000 });
    keeper.start();
    await keeper.whenReady();
    standin.failTokenRequests({ kind: 'status', status: 503 }, Infinity);
    await waitFor(() => !keeper.status().ready, 5000);
    const error = await keeper.getAccessToken().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TokenUnavailableError);
    expect((error as TokenUnavailableError).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    await waitFor(() => standin.tokenRequests.filter((r) => r.outcome === 'fault').length >= 4);
    const faults = standin.tokenRequests.filter((r) => r.outcome === 'fault').map((r) => r.at);
    const gaps = faults.slice(1).map((at, i) => at - faults[i]!);
    // random 0.5: 0.5 s, 1 s, 2 s between attempts (plus request time).
    expect(gaps[1]!).toBeGreaterThan(gaps[0]!);
    expect(gaps[2]!).toBeGreaterThan(gaps[1]!);
    expect(keeper.status()).toMatchObject({ ready: false, lastError: { kind: 'server' } });

    standin.clearTokenFaults();
    await waitFor(() => keeper.status().ready, 10_000);
    expect(keeper.status().consecutiveFailures).toBe(0);
    expect(await callApi(standin, await keeper.getAccessToken())).toBe(200);
  });
});
