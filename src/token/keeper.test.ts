import { expose, createMetricsRegistry, type MetricsRegistry } from '../telemetry/exposition.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { busiestWindow } from '../../test/helpers/windows.js';
import { systemClock } from '../clock.js';
import { StoreError, TokenEndpointError, TokenUnavailableError } from '../errors.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { createCredentialsReader } from '../config/credentials.js';
import type { EntryKeys } from '../fleet/crypto.js';
import type { SharedTokenSet, StoredEntry, TokenSetStore } from '../fleet/token-sets.js';
import { TokenKeeper } from './keeper.js';
import { RECOVERY_CAP_MS } from './schedule.js';
import type { TokenCoordinator } from './coordination.js';
import { LEASE_POLL_MS, createTokenCoordinator } from './shared.js';
import type { ClientCredentials, GrantRequest, TokenEndpoint, TokenSet } from './types.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const SECRET = 'super-secret-value-0001';

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A scripted answer: fields overriding the default token set, an error to throw, or a pending answer. */
type Answer = Partial<TokenSet> | Error | Deferred<Partial<TokenSet>>;

/** Records every request; answers from the script, then with fresh tokens (or `failWith`). */
class FakeEndpoint implements TokenEndpoint {
  readonly requests: { at: number; request: GrantRequest }[] = [];
  readonly issued: string[] = [];
  readonly script: Answer[] = [];
  failWith: Error | undefined;
  lifetimeSeconds = 1000;
  private count = 0;

  async requestToken(request: GrantRequest): Promise<TokenSet> {
    this.requests.push({ at: Date.now(), request });
    const answer = this.script.shift() ?? this.failWith ?? {};
    if (answer instanceof Error) throw answer;
    const overrides = 'promise' in answer ? await answer.promise : answer;
    this.count += 1;
    const tokenSet: TokenSet = {
      accessToken: `access-${this.count}`,
      tokenType: 'bearer',
      expiresInSeconds: this.lifetimeSeconds,
      lifetimeDefaulted: false,
      refreshToken: `refresh-${this.count}`,
      ...overrides,
    };
    this.issued.push(tokenSet.accessToken);
    if (typeof tokenSet.refreshToken === 'string') this.issued.push(tokenSet.refreshToken);
    return tokenSet;
  }

  grants(): string[] {
    return this.requests.map((r) => r.request.grant);
  }

  /** Seconds since T0 of each request. */
  times(): number[] {
    return this.requests.map((r) => (r.at - T0) / 1000);
  }
}

function serverError(retryAfterMs?: number): TokenEndpointError {
  return new TokenEndpointError('server', 'token endpoint answered 503', {
    status: 503,
    retryAfterMs,
  });
}

function rejected(): TokenEndpointError {
  return new TokenEndpointError('rejected', 'token endpoint answered 400 invalid_grant', {
    status: 400,
    oauthError: 'invalid_grant',
  });
}

interface Harness {
  keeper: TokenKeeper;
  endpoint: FakeEndpoint;
  lines: string[];
  registry: MetricsRegistry;
  credentials: ClientCredentials;
  readCredentials: ReturnType<typeof vi.fn<() => Promise<ClientCredentials>>>;
}

let h: Harness;

function setup(
  options: {
    random?: number | (() => number);
    waitMs?: number;
    coordinator?: TokenCoordinator;
    recoveryBackoffCapMs?: number;
  } = {},
): Harness {
  const endpoint = new FakeEndpoint();
  const random = options.random ?? 0.5;
  const lines: string[] = [];
  const logger = createLogger({
    level: 'trace',
    destination: { write: (line: string) => void lines.push(line) },
  });
  const registry = createMetricsRegistry();
  const metrics = createMetrics({ registry, defaultMetrics: false });
  const harness = {
    endpoint,
    lines,
    registry,
    credentials: { clientId: 'client-a', clientSecret: SECRET },
  } as Harness;
  harness.readCredentials = vi.fn(() => Promise.resolve({ ...harness.credentials }));
  harness.keeper = new TokenKeeper({
    endpoint,
    readCredentials: harness.readCredentials,
    settings: {
      waitMs: options.waitMs ?? 5000,
      refreshMarginSeconds: 60,
      refreshFraction: 0.2,
      recoveryBackoffCapMs: options.recoveryBackoffCapMs,
    },
    clock: systemClock,
    random: typeof random === 'function' ? random : () => random,
    logger,
    metrics,
    coordinator: options.coordinator,
  });
  return harness;
}

type LogLine = Record<string, unknown>;
const logLines = (): LogLine[] => h.lines.map((l) => JSON.parse(l) as LogLine);

/** Let pending promise callbacks run without moving time. */
const flush = () => vi.advanceTimersByTimeAsync(0);
const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);
/** Move to `seconds` after T0. */
const advanceTo = (seconds: number) =>
  vi.advanceTimersByTimeAsync(T0 + seconds * 1000 - Date.now());

/** Settles a promise into a value or the error, so a rejection is never unhandled. */
function outcome<T>(promise: Promise<T>): Promise<T | Error> {
  return promise.then(
    (v) => v,
    (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
  );
}

async function counter(registry: MetricsRegistry, grant: string, result: string): Promise<number> {
  const metric = await registry.getSingleMetric('oauth_sidecar_token_requests_total')!.get();
  return (
    metric.values.find((v) => v.labels.grant === grant && v.labels.outcome === result)?.value ?? 0
  );
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(T0);
  h = setup();
});

afterEach(() => {
  h.keeper.stop();
  // Whatever the test did: no log line and no status carries a token or the secret.
  const secrets = [...h.endpoint.issued, SECRET, h.credentials.clientSecret];
  for (const line of h.lines) {
    for (const secret of secrets) expect(line).not.toContain(secret);
  }
  const status = JSON.stringify(h.keeper.status());
  for (const secret of secrets) expect(status).not.toContain(secret);
  vi.useRealTimers();
});

describe('TokenKeeper start-up', () => {
  it('runs a client-credentials grant at once and becomes ready', async () => {
    expect(h.keeper.status().ready).toBe(false);
    const ready = h.keeper.whenReady();
    h.keeper.start();
    await flush();
    expect(h.endpoint.requests).toHaveLength(1);
    expect(h.endpoint.requests[0]!.request).toEqual({
      grant: 'client_credentials',
      credentials: { clientId: 'client-a', clientSecret: SECRET },
    });
    await flush();
    await ready;
    expect(h.keeper.status().ready).toBe(true);
    await expect(h.keeper.getAccessToken()).resolves.toBe('access-1');
    expect(h.keeper.status()).toMatchObject({
      ready: true,
      lastGrant: 'client_credentials',
      expiresInSeconds: 1000,
      tokenAgeSeconds: 0,
    });
  });

  it('callers before the first token wait for it', async () => {
    h.endpoint.script.push(deferredAnswer());
    h.keeper.start();
    const token = h.keeper.getAccessToken();
    await advance(1000);
    pending.resolve({});
    await expect(token).resolves.toBe('access-1');
    expect(h.endpoint.requests).toHaveLength(1);
  });

  it('retries a failed start-up with backoff and whenReady resolves on recovery', async () => {
    h.endpoint.failWith = serverError();
    const ready = outcome(h.keeper.whenReady());
    h.keeper.start();
    await advance(10_000);
    expect(h.keeper.status().ready).toBe(false);
    expect(h.keeper.status().consecutiveFailures).toBeGreaterThan(2);
    h.endpoint.failWith = undefined;
    await advance(30_000);
    expect(await ready).toBeUndefined();
    expect(h.keeper.status().consecutiveFailures).toBe(0);
  });

  it('warns when the lifetime was defaulted', async () => {
    h.endpoint.script.push({ expiresInSeconds: 300, lifetimeDefaulted: true });
    h.keeper.start();
    await flush();
    const warning = logLines().find((l) => l.level === 'warn');
    expect(warning?.msg).toMatch(/no expiresIn; assuming 300 s/);
  });
});

let pending: Deferred<Partial<TokenSet>>;
function deferredAnswer(): Deferred<Partial<TokenSet>> {
  pending = deferred();
  return pending;
}

describe('TokenKeeper currentToken (the proxy asks it before getAccessToken)', () => {
  it('is the valid token held now: undefined before the first, after expiry and once stopped; it never asks the endpoint', async () => {
    expect(h.keeper.currentToken()).toBeUndefined();
    await flush();
    expect(h.endpoint.requests).toHaveLength(0);
    h.keeper.start();
    await flush();
    await flush();
    expect(h.keeper.currentToken()).toBe('access-1');
    // The renewal at 790 s hangs: at 1000 s the held token has expired and nothing replaced it.
    h.endpoint.script.push(deferredAnswer());
    await advanceTo(999.999);
    expect(h.keeper.currentToken()).toBe('access-1');
    await advanceTo(1000);
    expect(h.keeper.currentToken()).toBeUndefined();
    expect(h.endpoint.requests).toHaveLength(2);
    pending.resolve({});
    await flush();
    expect(h.keeper.currentToken()).toBe('access-2');
    h.keeper.stop();
    expect(h.keeper.currentToken()).toBeUndefined();
  });
});

describe('TokenKeeper renewal', () => {
  it('renews at expiresAt - max(margin, fraction × lifetime) - jitter', async () => {
    // lifetime 1000 s: lead max(60, 200) = 200 s, + 5% jitter (random 0.5) = 210 s → at 790 s.
    h.keeper.start();
    await flush();
    expect(h.keeper.status().nextRenewalAt).toBe(new Date(T0 + 790_000).toISOString());
    await advanceTo(789.999);
    expect(h.endpoint.requests).toHaveLength(1);
    await advanceTo(790);
    expect(h.endpoint.times()).toEqual([0, 790]);
    expect(h.endpoint.requests[1]!.request).toEqual({
      grant: 'refresh_token',
      refreshToken: 'refresh-1',
    });
    await expect(h.keeper.getAccessToken()).resolves.toBe('access-2');
  });

  it('counts the lifetime from when the request was sent', async () => {
    h.endpoint.script.push(deferredAnswer());
    h.keeper.start();
    await advance(4000);
    pending.resolve({});
    await flush();
    expect(h.keeper.status().expiresInSeconds).toBe(996);
    expect(h.keeper.status().nextRenewalAt).toBe(new Date(T0 + 790_000).toISOString());
  });

  it('never renews earlier than half the lifetime', async () => {
    h.endpoint.lifetimeSeconds = 10;
    h.keeper.start();
    await advanceTo(4.999);
    expect(h.endpoint.requests).toHaveLength(1);
    await advanceTo(5);
    expect(h.endpoint.times()).toEqual([0, 5]);
  });

  it('always uses the newest refresh token', async () => {
    h.keeper.start();
    await advanceTo(790 * 3);
    expect(h.endpoint.requests.map((r) => r.request)).toEqual([
      expect.objectContaining({ grant: 'client_credentials' }),
      { grant: 'refresh_token', refreshToken: 'refresh-1' },
      { grant: 'refresh_token', refreshToken: 'refresh-2' },
      { grant: 'refresh_token', refreshToken: 'refresh-3' },
    ]);
  });

  it('a null refresh token makes the next renewal use client credentials', async () => {
    h.endpoint.script.push({ refreshToken: null });
    h.keeper.start();
    await flush();
    expect(h.keeper.status().refreshTokenHeld).toBe(false);
    expect(h.keeper.status().refreshTokenHeld).toBe(false);
    await advanceTo(790);
    expect(h.endpoint.grants()).toEqual(['client_credentials', 'client_credentials']);
    expect(h.readCredentials).toHaveBeenCalledTimes(2);
  });

  it('an absent refresh token keeps the held one for the next refresh', async () => {
    h.endpoint.script.push({}, { refreshToken: undefined });
    h.keeper.start();
    await advanceTo(790);
    expect(h.keeper.status().refreshTokenHeld).toBe(true);
    await advanceTo(790 * 2);
    expect(h.endpoint.requests.map((r) => r.request)).toEqual([
      expect.objectContaining({ grant: 'client_credentials' }),
      { grant: 'refresh_token', refreshToken: 'refresh-1' },
      { grant: 'refresh_token', refreshToken: 'refresh-1' },
    ]);
  });

  it('a rejected refresh grant drops the refresh token and runs client credentials at once', async () => {
    h.endpoint.script.push({}, rejected());
    h.keeper.start();
    await advanceTo(790);
    expect(h.endpoint.grants()).toEqual([
      'client_credentials',
      'refresh_token',
      'client_credentials',
    ]);
    expect(h.endpoint.times()).toEqual([0, 790, 790]);
    await expect(h.keeper.getAccessToken()).resolves.toBe('access-2');
    expect(h.keeper.status().consecutiveFailures).toBe(0);
    expect(await counter(h.registry, 'refresh_token', 'rejected')).toBe(1);
    expect(await counter(h.registry, 'client_credentials', 'success')).toBe(2);
    // The answer to the client-credentials grant carried a refresh token: the next renewal uses it.
    await advanceTo(790 * 2);
    expect(h.endpoint.requests[3]!.request).toEqual({
      grant: 'refresh_token',
      refreshToken: 'refresh-2',
    });
  });

  it('reads the credentials before every client-credentials grant (rotation)', async () => {
    h.endpoint.script.push({ refreshToken: null }, { refreshToken: null });
    h.keeper.start();
    await flush();
    h.credentials = { clientId: 'client-a', clientSecret: 'rotated-secret-0002' };
    await advanceTo(790);
    expect(h.readCredentials).toHaveBeenCalledTimes(2);
    expect(h.endpoint.requests[1]!.request).toEqual({
      grant: 'client_credentials',
      credentials: { clientId: 'client-a', clientSecret: 'rotated-secret-0002' },
    });
    // Noticing the change is the credentials reader's job (its onChange, wired in main.ts).
    expect(logLines().some((l) => l.event === 'credentials')).toBe(false);
  });
});

describe('TokenKeeper single flight', () => {
  it('50 concurrent callers after expiry share exactly one request', async () => {
    h.keeper.start();
    await flush();
    h.endpoint.script.push(deferredAnswer());
    // The host slept past expiry: no timer fired, the next caller triggers the renewal.
    vi.setSystemTime(T0 + 2_000_000);
    expect(h.keeper.status().ready).toBe(false);
    const callers = Array.from({ length: 50 }, () => h.keeper.getAccessToken());
    expect(h.endpoint.requests).toHaveLength(2);
    await advance(100);
    pending.resolve({});
    const tokens = await Promise.all(callers);
    expect(new Set(tokens)).toEqual(new Set(['access-2']));
    expect(h.endpoint.requests).toHaveLength(2);
  });

  it('callers at expiry during an in-flight renewal do not start another', async () => {
    h.endpoint.lifetimeSeconds = 10;
    h.endpoint.script.push({}, deferredAnswer());
    h.keeper.start();
    await advanceTo(10);
    expect(h.endpoint.requests).toHaveLength(2);
    const callers = Array.from({ length: 50 }, () => h.keeper.getAccessToken());
    await advance(1000);
    pending.resolve({});
    expect(new Set(await Promise.all(callers))).toEqual(new Set(['access-2']));
    expect(h.endpoint.requests).toHaveLength(2);
  });
});

describe('TokenKeeper failures', () => {
  it('backs off with growing intervals, keeps the valid token, then 503s, retries within 8 s and recovers', async () => {
    h.endpoint.lifetimeSeconds = 100; // renewal at 50 s (half the lifetime)
    h.keeper.start();
    await flush();
    h.endpoint.failWith = serverError();
    await advanceTo(99);
    // Still valid during the outage: used as is, no extra request.
    const before = h.endpoint.requests.length;
    await expect(h.keeper.getAccessToken()).resolves.toBe('access-1');
    expect(h.endpoint.requests).toHaveLength(before);

    await advanceTo(400);
    const times = h.endpoint.times().slice(1);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    // random 0.5: half of 1, 2, 4, 8, 16, 32 while access-1 is valid (until 100 s). The next
    // retry, due at 111.5 s by the backoff, comes half the 8 s recovery cap after the expiry
    // (104 s), and so does every one after it: the 60 s cap applies only while a token is valid.
    expect(gaps.slice(0, 6)).toEqual([0.5, 1, 2, 4, 8, 16]);
    expect(times[7]).toBe(104);
    expect(new Set(gaps.slice(7))).toEqual(new Set([4]));
    expect(h.keeper.status().lastError).toMatchObject({ kind: 'server' });
    expect(await counter(h.registry, 'refresh_token', 'error')).toBe(times.length);

    // Expired, and backoff forbids an attempt: the caller waits waitMs, then gets Retry-After.
    const requestsBefore = h.endpoint.requests.length;
    await advance(500); // retries every 4 s from 104 s: the last at 400 s, the next at 404 s
    const nextAt = Date.parse(h.keeper.status().nextRenewalAt!);
    expect(nextAt - Date.now()).toBe(3500);
    const call = outcome(h.keeper.getAccessToken());
    await advance(4999);
    let settled = false;
    void call.then(() => (settled = true));
    await flush();
    expect(settled).toBe(false);
    await advance(1);
    const error = await call;
    expect(error).toBeInstanceOf(TokenUnavailableError);
    // The caller waited through one more failed retry; Retry-After names the one after it.
    expect(h.endpoint.requests).toHaveLength(requestsBefore + 1);
    const retryAfter = (error as TokenUnavailableError).retryAfterSeconds!;
    expect(retryAfter).toBe(
      Math.ceil((Date.parse(h.keeper.status().nextRenewalAt!) - Date.now()) / 1000),
    );
    expect(retryAfter).toBe(3); // the retry after it at 408 s, now 405.5 s

    // Recovery at the next scheduled attempt.
    h.endpoint.failWith = undefined;
    const recoveryAt = Date.parse(h.keeper.status().nextRenewalAt!);
    await advance(recoveryAt - Date.now() - 1000);
    const waiting = h.keeper.getAccessToken();
    await advance(1000);
    await expect(waiting).resolves.toBe('access-2');
    expect(h.keeper.status()).toMatchObject({ ready: true, consecutiveFailures: 0 });
  });

  it('honours Retry-After while the token is valid, and against callers; at most 8 s once it has expired', async () => {
    h.endpoint.lifetimeSeconds = 10; // renewal at 5 s, expiry at 10 s
    h.endpoint.script.push({}, serverError(3_000), serverError(30_000));
    h.keeper.start();
    await advanceTo(12);
    // Retry-After 3 s ends before the expiry: honoured. Retry-After 30 s (until 38 s) does not: the
    // retry comes 8 s (the recovery cap) after the expiry.
    expect(h.endpoint.times()).toEqual([0, 5, 8]);
    const call = outcome(h.keeper.getAccessToken());
    expect(h.endpoint.requests).toHaveLength(3);
    await advance(5000);
    const error = (await call) as TokenUnavailableError;
    expect(error).toBeInstanceOf(TokenUnavailableError);
    expect(error.retryAfterSeconds).toBe(1); // next attempt at 18 s, now 17 s
    await advanceTo(17.999);
    expect(h.endpoint.requests).toHaveLength(3);
    await advanceTo(18);
    expect(h.endpoint.times()).toEqual([0, 5, 8, 18]);
    expect(h.keeper.status().ready).toBe(true);
  });

  it('retries a rejected client-credentials grant with backoff (the secret may be rotated)', async () => {
    h.endpoint.failWith = rejected();
    h.keeper.start();
    await advance(3000);
    expect(h.endpoint.times()).toEqual([0, 0.5, 1.5]);
    expect(h.endpoint.grants().every((g) => g === 'client_credentials')).toBe(true);
    expect(await counter(h.registry, 'client_credentials', 'rejected')).toBe(3);
    h.credentials = { clientId: 'client-a', clientSecret: 'rotated-secret-0003' };
    h.endpoint.failWith = undefined;
    await advance(2000);
    expect(h.keeper.status().ready).toBe(true);
    expect(h.endpoint.requests.at(-1)!.request).toMatchObject({
      credentials: { clientSecret: 'rotated-secret-0003' },
    });
  });

  it('treats an unreadable credentials source as a failure and retries', async () => {
    h.readCredentials.mockRejectedValueOnce(new Error('ENOENT: /secrets/client-secret'));
    h.keeper.start();
    await flush();
    expect(h.endpoint.requests).toHaveLength(0);
    expect(h.keeper.status().lastError).toMatchObject({ kind: 'credentials' });
    await advance(1000);
    expect(h.keeper.status().ready).toBe(true);
  });
});

describe('TokenKeeper.invalidate', () => {
  /** A 401 to a superseded token: replay (with the newer one), no renewal, the newer one kept. */
  async function expectReplayWithHeldToken(stale: string, held: string): Promise<void> {
    const requests = h.endpoint.requests.length;
    expect(h.keeper.invalidate(stale)).toBe('replay');
    expect(h.endpoint.requests).toHaveLength(requests);
    await expect(h.keeper.getAccessToken()).resolves.toBe(held);
  }

  it('drops the current token and runs one forced renewal; a superseded token only replays', async () => {
    h.keeper.start();
    await flush();
    h.endpoint.script.push(deferredAnswer());
    expect(h.keeper.invalidate('access-1')).toBe('renewing');
    expect(h.endpoint.requests).toHaveLength(2);
    expect(h.keeper.status().ready).toBe(false);
    const waiting = h.keeper.getAccessToken();
    // A concurrent 401 with the same token shares the renewal.
    expect(h.keeper.invalidate('access-1')).toBe('replay');
    expect(h.endpoint.requests).toHaveLength(2);
    pending.resolve({});
    await expect(waiting).resolves.toBe('access-2');

    await expectReplayWithHeldToken('access-1', 'access-2');
    expect(h.endpoint.requests).toHaveLength(2);
  });

  it('asks for a replay when a scheduled renewal replaced the token that got the 401', async () => {
    h.keeper.start();
    await flush();
    // The request left with access-1; the scheduled renewal lands before the upstream answers.
    await advance(900_000);
    await flush();
    expect(h.endpoint.requests).toHaveLength(2);
    await expect(h.keeper.getAccessToken()).resolves.toBe('access-2');
    await expectReplayWithHeldToken('access-1', 'access-2');
  });

  it('with no valid token and backoff in force, a 401 still asks for a replay, which ends in token_unavailable', async () => {
    h.keeper.start();
    await flush();
    h.endpoint.failWith = serverError(20_000);
    expect(h.keeper.invalidate('access-1')).toBe('renewing'); // forced renewal starts, and fails
    await flush();
    expect(h.keeper.status().ready).toBe(false);
    // Another request that left with access-1, and one with a token never seen: no new request,
    // but a replay (it waits like any request made while no token is valid).
    expect(h.keeper.invalidate('access-1')).toBe('replay');
    expect(h.keeper.invalidate('never-issued')).toBe('replay');
    expect(h.endpoint.requests).toHaveLength(2);
    const replay = outcome(h.keeper.getAccessToken());
    await advance(5000);
    const error = await replay;
    expect(error).toBeInstanceOf(TokenUnavailableError);
    // Retry-After 20 s, but no valid token: the retry is 8 s after the failure (the recovery cap).
    expect((error as TokenUnavailableError).retryAfterSeconds).toBe(3);
    expect(h.endpoint.requests).toHaveLength(2);
  });

  it('allows one forced renewal per 5 s and keeps the newest token meanwhile', async () => {
    h.keeper.start();
    await flush();
    expect(h.keeper.invalidate('access-1')).toBe('renewing');
    await flush();
    await advance(4999);
    expect(h.keeper.invalidate('access-2')).toBe('keep');
    expect(h.endpoint.requests).toHaveLength(2);
    await expect(h.keeper.getAccessToken()).resolves.toBe('access-2');
    await advance(1);
    expect(h.keeper.invalidate('access-2')).toBe('renewing');
    await flush();
    expect(h.endpoint.requests).toHaveLength(3);
    await expect(h.keeper.getAccessToken()).resolves.toBe('access-3');
  });

  it('drops the rejected token but does not force a request against backoff', async () => {
    h.keeper.start();
    await flush();
    h.endpoint.failWith = serverError(20_000);
    await advanceTo(790); // the scheduled renewal failed: Retry-After 20 s, access-1 still valid
    expect(h.endpoint.requests).toHaveLength(2);
    expect(h.keeper.status().ready).toBe(true);
    expect(h.keeper.invalidate('access-1')).toBe('renewing');
    expect(h.endpoint.requests).toHaveLength(2);
    expect(h.keeper.status().ready).toBe(false);
    // Not serving any more: the retry, 20 s away while access-1 was valid, is pulled in to 8 s
    // (the recovery cap) from the 401.
    expect(h.keeper.status().nextRenewalAt).toBe(new Date(T0 + 798_000).toISOString());
    // The replay waits waitMs (5 s) and gets token_unavailable. The retry then runs on schedule
    // and brings access-2.
    h.endpoint.failWith = undefined;
    const replay = outcome(h.keeper.getAccessToken());
    await advanceTo(811);
    expect(await replay).toBeInstanceOf(TokenUnavailableError);
    await expect(h.keeper.getAccessToken()).resolves.toBe('access-2');
    expect(h.endpoint.requests).toHaveLength(3);
  });
});

describe('TokenKeeper observability', () => {
  it('counts token requests by grant and outcome and observes their duration', async () => {
    h.endpoint.script.push(deferredAnswer(), rejected());
    h.keeper.start();
    await advance(250);
    pending.resolve({});
    await advanceTo(790);
    expect(await counter(h.registry, 'client_credentials', 'success')).toBe(2);
    expect(await counter(h.registry, 'refresh_token', 'rejected')).toBe(1);
    const text = (await expose(h.registry, undefined)).body;
    expect(text).toContain(
      'oauth_sidecar_token_request_duration_seconds_bucket{le="0.25",grant="client_credentials"} 2',
    );
    expect(text).toContain(
      'oauth_sidecar_token_request_duration_seconds_count{grant="refresh_token"} 1',
    );
  });

  it('status is JSON-safe and never carries a token', async () => {
    h.endpoint.script.push({}, serverError());
    h.keeper.start();
    await advanceTo(790);
    const status = h.keeper.status();
    expect(status).toEqual({
      ready: true,
      lastGrant: 'client_credentials',
      tokenAgeSeconds: 790,
      expiresInSeconds: 210,
      lifetimeSeconds: 1000,
      nextRenewalAt: new Date(T0 + 790_500).toISOString(),
      refreshTokenHeld: true,
      lastError: {
        kind: 'server',
        message: 'token endpoint answered 503',
        at: new Date(T0 + 790_000).toISOString(),
      },
      consecutiveFailures: 1,
      requestInFlight: false,
    });
    expect(JSON.parse(JSON.stringify(status))).toEqual(status);
  });

  it('logs one line per token event with grant, outcome, lifetime and next renewal', async () => {
    h.endpoint.script.push({}, rejected());
    h.keeper.start();
    await advanceTo(790);
    const events = logLines().filter((l) => l.event === 'token' && l.outcome !== undefined);
    expect(events.map((e) => [e.grant, e.outcome])).toEqual([
      ['client_credentials', 'success'],
      ['refresh_token', 'rejected'],
      ['client_credentials', 'success'],
    ]);
    expect(events[0]).toMatchObject({
      lifetimeSeconds: 1000,
      nextRenewalAt: new Date(T0 + 790_000).toISOString(),
    });
    expect(events[1]).toMatchObject({ errorKind: 'rejected', oauthError: 'invalid_grant' });
  });
});

describe('TokenKeeper.stop', () => {
  it('rejects waiting callers and clears every timer', async () => {
    h.endpoint.failWith = serverError();
    h.keeper.start();
    await flush();
    const call = outcome(h.keeper.getAccessToken());
    const ready = outcome(h.keeper.whenReady());
    h.keeper.stop();
    expect(await call).toBeInstanceOf(TokenUnavailableError);
    expect(await ready).toBeInstanceOf(TokenUnavailableError);
    expect(vi.getTimerCount()).toBe(0);
    await expect(h.keeper.getAccessToken()).rejects.toBeInstanceOf(TokenUnavailableError);
  });
});

/** The most token requests in any 10-second window. */
const busiest = (): number => busiestWindow(h.endpoint.requests.map((r) => r.at));

/** Callers every `everyMs` for `forMs`, each settled into a token or an error. */
async function callersFor(forMs: number, everyMs: number): Promise<(string | Error)[]> {
  const calls: Promise<string | Error>[] = [];
  for (let t = 0; t < forMs; t += everyMs) {
    calls.push(outcome(h.keeper.getAccessToken()));
    await advance(everyMs);
  }
  await advance(5000);
  return Promise.all(calls);
}

describe('TokenKeeper limits that hold whatever the endpoint answers', () => {
  it('a 40-day lifetime renews once, on time: the renewal timer is re-armed, never clamped to 1 ms', async () => {
    const lifetime = 40 * 86_400;
    h.endpoint.lifetimeSeconds = lifetime;
    h.keeper.start();
    await advance(60_000);
    expect(h.endpoint.requests).toHaveLength(1);
    // lead = 0.2 × lifetime × (1 + 0.1 × 0.5) = 725 760 s: renewal at day 31.6, past 2^31−1 ms.
    const renewAt = lifetime - 0.2 * lifetime * 1.05;
    expect(Date.parse(h.keeper.status().nextRenewalAt!)).toBe(T0 + renewAt * 1000);
    await advanceTo(renewAt - 1);
    expect(h.endpoint.requests).toHaveLength(1);
    await advanceTo(renewAt);
    expect(h.endpoint.times()).toEqual([0, renewAt]);
  });

  it('the largest lifetime (2^31−1 s) is held and renewed only decades later', async () => {
    h.endpoint.lifetimeSeconds = 2 ** 31 - 1;
    h.keeper.start();
    await advance(3_600_000);
    expect(h.endpoint.requests).toHaveLength(1);
    await expect(h.keeper.getAccessToken()).resolves.toBe('access-1');
  });

  it('Retry-After: 3000000 with a valid token waits 3600 s, not 1 ms (capped, and no timer overflow)', async () => {
    h.endpoint.lifetimeSeconds = 100_000; // renewal at 79 000 s, expiry at 100 000 s
    h.endpoint.script.push({}, serverError(3_000_000_000));
    h.keeper.start();
    await advanceTo(79_000 + 60);
    expect(h.endpoint.times()).toEqual([0, 79_000]);
    expect(h.keeper.status().nextRenewalAt).toBe(new Date(T0 + 82_600_000).toISOString());
    await advanceTo(82_599.999);
    expect(h.endpoint.requests).toHaveLength(2);
    await advanceTo(82_600);
    expect(h.endpoint.times()).toEqual([0, 79_000, 82_600]);
    expect(h.keeper.status()).toMatchObject({ ready: true, consecutiveFailures: 0 });
  });

  it('expiresIn: 0 never hands out the expired token; callers get 503 and requests stay ≤ 10 per 10 s', async () => {
    h.endpoint.lifetimeSeconds = 0;
    h.keeper.start();
    const results = await callersFor(30_000, 50);
    expect(results.length).toBe(600);
    for (const result of results) expect(result).toBeInstanceOf(TokenUnavailableError);
    expect(busiest()).toBeLessThanOrEqual(10);
    expect(h.endpoint.requests.length).toBeGreaterThan(0);
  });

  it('5xx forever with no backoff delay (random 0): at most 10 token requests in any 10 s', async () => {
    h.keeper.stop();
    h = setup({ random: 0 });
    h.endpoint.failWith = serverError();
    h.keeper.start();
    const results = await callersFor(30_000, 50);
    expect(results.every((r) => r instanceof TokenUnavailableError)).toBe(true);
    expect(busiest()).toBe(10);
    // A caller during the ceiling waits waitMs, then 503 with Retry-After to the next slot.
    const call = outcome(h.keeper.getAccessToken());
    await advance(5000);
    const error = await call;
    expect(error).toBeInstanceOf(TokenUnavailableError);
    expect((error as TokenUnavailableError).retryAfterSeconds).toBeGreaterThanOrEqual(1);
  });

  it('a rejected refresh grant and rejected client credentials forever: ≤ 10 per 10 s', async () => {
    h.keeper.stop();
    h = setup({ random: 0 });
    h.endpoint.lifetimeSeconds = 2;
    h.keeper.start();
    await flush();
    h.endpoint.failWith = rejected();
    await callersFor(60_000, 100);
    expect(h.endpoint.grants()).toContain('refresh_token');
    expect(busiest()).toBeLessThanOrEqual(10);
  });

  it('401 forever (every token rejected upstream at once): forced renewals stay ≤ 10 per 10 s', async () => {
    h.keeper.stop();
    h = setup({ random: 0 });
    h.keeper.start();
    for (let t = 0; t < 60_000; t += 20) {
      void h.keeper.getAccessToken().then(
        (token) => h.keeper.invalidate(token),
        () => undefined,
      );
      await advance(20);
    }
    expect(h.endpoint.requests.length).toBeGreaterThan(10);
    expect(busiest()).toBeLessThanOrEqual(10);
  });

  it('a failure nobody anticipated names the grant that was running (refresh_token)', async () => {
    let calls = 0;
    h.keeper.stop();
    h = setup({
      random: () => {
        calls += 1;
        // The second draw is the renewal jitter after the refresh grant's success.
        if (calls === 2) throw new Error('boom');
        return 0.5;
      },
    });
    h.keeper.start();
    await advanceTo(790);
    expect(h.endpoint.grants()).toEqual(['client_credentials', 'refresh_token']);
    const failure = logLines().find((l) => l.outcome === 'error');
    expect(failure).toMatchObject({ grant: 'refresh_token', errorKind: 'internal' });
  });
});

/**
 * Each failure's wait, from its log line: `retrying at <time>` minus the line's own time (ms).
 * Failures that fell back to another grant at once ("falling back to ...") are not waits.
 */
function retryWaits(lines: readonly string[]): number[] {
  return lines
    .map((l) => JSON.parse(l) as { time: string; msg: string })
    .flatMap(({ time, msg }) => {
      const at = /retrying at (\S+)$/.exec(msg)?.[1];
      return at === undefined ? [] : [Date.parse(at) - Date.parse(time)];
    });
}

/** The ≤ 8 s rule after every failure, and the ceiling: asserted by each test below. */
function expectRecoveryRule(harness: Harness, from = 0): void {
  const waits = retryWaits(harness.lines).slice(from);
  expect(waits.length).toBeGreaterThan(0);
  expect(Math.max(...waits)).toBeLessThanOrEqual(RECOVERY_CAP_MS);
  expect(busiestWindow(harness.endpoint.requests.map((r) => r.at))).toBeLessThanOrEqual(10);
}

/** random ≈ 1: every jittered wait at its longest, the worst case for recovery. */
const WORST = 0.999_999;

describe('TokenKeeper recovery: at most 8 s between attempts while no valid token is held', () => {
  it('after 20 failed attempts (5xx), the next attempt is ≤ 8 s away, and so is every one after', async () => {
    h.keeper.stop();
    h = setup({ random: WORST });
    h.endpoint.failWith = serverError();
    h.keeper.start();
    // Full jitter over 1, 2, 4, then 8 s (not 16, 32, 60): 20 attempts within 1 + 2 + 4 + 17 × 8 s.
    await advance(143_000);
    expect(h.endpoint.requests.length).toBeGreaterThanOrEqual(20);
    const status = h.keeper.status();
    expect(status.consecutiveFailures).toBeGreaterThanOrEqual(20);
    expect(Date.parse(status.nextRenewalAt!) - Date.now()).toBeLessThanOrEqual(RECOVERY_CAP_MS);
    expectRecoveryRule(h);
    // The endpoint is fixed: serving again at the next attempt, within 8 s.
    h.endpoint.failWith = undefined;
    await advance(RECOVERY_CAP_MS);
    expect(h.keeper.status()).toMatchObject({ ready: true, consecutiveFailures: 0 });
  });

  it('Retry-After: 3000000 with no valid token: the next attempt is 8 s away, again and again', async () => {
    h.endpoint.failWith = serverError(3_000_000_000);
    h.keeper.start();
    await advance(40_000);
    expect(h.endpoint.times()).toEqual([0, 8, 16, 24, 32, 40]);
    // A caller waits waitMs (5 s) and is told the next attempt's second.
    const call = outcome(h.keeper.getAccessToken());
    await advance(5_000);
    expect(((await call) as TokenUnavailableError).retryAfterSeconds).toBe(3);
    expectRecoveryRule(h);
    h.endpoint.failWith = undefined;
    await advance(3_000);
    expect(h.keeper.status().ready).toBe(true);
  });

  it('token.recoveryBackoffCapMs 2000: Retry-After 3000000 and a deep backoff both wait 2 s', async () => {
    h.keeper.stop();
    h = setup({ random: WORST, recoveryBackoffCapMs: 2_000 });
    h.endpoint.failWith = serverError(3_000_000_000);
    h.keeper.start();
    await advance(10_000);
    expect(h.endpoint.times()).toEqual([0, 2, 4, 6, 8, 10]);
    h.endpoint.failWith = serverError();
    await advance(20_000);
    expect(h.keeper.status().consecutiveFailures).toBeGreaterThanOrEqual(15);
    expect(Math.max(...retryWaits(h.lines))).toBeLessThanOrEqual(2_000);
    h.endpoint.failWith = undefined;
    await advance(2_000);
    expect(h.keeper.status().ready).toBe(true);
  });

  it('a valid token held: Retry-After 3000 s is honoured until the expiry, then the retry comes ≤ 8 s after it', async () => {
    h.keeper.stop();
    h = setup({ random: WORST });
    // Renewal at 10 000 − 2 000 × 1.1 ≈ 7 800 s; Retry-After would wait until ≈ 10 800 s.
    h.endpoint.lifetimeSeconds = 10_000;
    h.endpoint.failWith = serverError(3_000_000);
    h.endpoint.script.push({});
    h.keeper.start();
    await advanceTo(9_999.999);
    expect(h.endpoint.requests).toHaveLength(2); // the grant and the failed renewal
    const renewalAt = h.endpoint.times()[1]!;
    expect(renewalAt).toBeCloseTo(7_800, 0);
    // The one pending retry was pulled in to 8 s after the expiry when it was computed.
    expect(h.keeper.status().nextRenewalAt).toBe(new Date(T0 + 10_008_000).toISOString());
    await advanceTo(10_008);
    expect(h.endpoint.times().slice(2)).toEqual([10_008]);
    expectRecoveryRule(h, 1);
    // Whereas a Retry-After that ends before the expiry is honoured to the second.
    expect(retryWaits(h.lines)[0]).toBe(10_008_000 - renewalAt * 1000);
  });

  it('a long wait pending when the token expires is pulled in to ≤ 8 s after the expiry, on one timer', async () => {
    h.keeper.stop();
    h = setup({ random: WORST });
    h.endpoint.lifetimeSeconds = 100; // renewal at 50 s, expiry at 100 s
    h.endpoint.script.push({});
    h.endpoint.failWith = serverError();
    h.keeper.start();
    await advanceTo(99.999);
    const whileValid = retryWaits(h.lines);
    expect(Math.max(...whileValid)).toBeGreaterThan(RECOVERY_CAP_MS); // 16 s, 32 s steps
    expect(Date.parse(h.keeper.status().nextRenewalAt!)).toBeLessThanOrEqual(T0 + 108_000);
    // One keeper timer (and no waiter): re-armed, never a second one or a loop.
    expect(vi.getTimerCount()).toBe(1);
    await advanceTo(108);
    expect(h.endpoint.times().at(-1)).toBeGreaterThan(100);
    expectRecoveryRule(h, whileValid.length);
  });

  it('a credentials change triggers an attempt at once, whatever the wait (rate ceiling permitting)', async () => {
    h.keeper.stop();
    h = setup({ random: WORST });
    h.endpoint.lifetimeSeconds = 100_000; // renewal at ≈ 78 000 s
    h.endpoint.script.push({}, serverError(3_000_000));
    h.keeper.start();
    await advanceTo(80_000);
    expect(h.endpoint.requests).toHaveLength(2);
    expect(Date.parse(h.keeper.status().nextRenewalAt!) - Date.now()).toBeGreaterThan(1_000_000);
    h.keeper.credentialsChanged();
    await flush();
    expect(h.endpoint.requests).toHaveLength(3);
    expect(h.endpoint.requests.at(-1)!.at).toBe(Date.now());

    // No failure to recover from: a change alone starts no request.
    h.keeper.credentialsChanged();
    await flush();
    expect(h.endpoint.requests).toHaveLength(3);

    // Within the ceiling's window: the attempt waits for the next free slot, not for the backoff.
    h.keeper.stop();
    h = setup({ random: 0 });
    h.endpoint.failWith = rejected();
    const start = Date.now();
    h.keeper.start();
    await advance(1_000);
    expect(h.endpoint.requests).toHaveLength(10);
    h.keeper.credentialsChanged();
    await flush();
    expect(h.endpoint.requests).toHaveLength(10);
    expect(h.keeper.status().nextRenewalAt).toBe(new Date(start + 10_000).toISOString());
    expect(busiest()).toBeLessThanOrEqual(10);
  });

  it("the credentials reader's onChange restarts the backoff: the failure after a fixed Secret file waits ≤ 1 s", async () => {
    h.keeper.stop();
    h = setup({ random: WORST });
    const files: Record<string, string> = { '/s/id': 'client-a\n', '/s/secret': 'wrong\n' };
    const reader = createCredentialsReader(
      { source: 'files', clientIdFile: '/s/id', clientSecretFile: '/s/secret' },
      (path) => Promise.resolve(files[path]!),
      { onChange: () => h.keeper.credentialsChanged() },
    );
    h.readCredentials.mockImplementation(reader);
    h.endpoint.failWith = rejected();
    h.keeper.start();
    await advance(60_000); // 401 forever: every wait 8 s by now
    expect(retryWaits(h.lines).at(-1)).toBeGreaterThan(7_990);
    const before = h.endpoint.requests.length;
    files['/s/secret'] = `${SECRET}\n`;
    h.endpoint.failWith = serverError(); // read at the next attempt; that one still fails
    const nextAt = Date.parse(h.keeper.status().nextRenewalAt!);
    expect(nextAt - Date.now()).toBeLessThanOrEqual(RECOVERY_CAP_MS);
    await advance(nextAt - Date.now() + 1); // the ISO time drops the fraction of a millisecond
    expect(h.endpoint.requests).toHaveLength(before + 1);
    expect(h.endpoint.requests.at(-1)!.request).toMatchObject({
      credentials: { clientSecret: SECRET },
    });
    expect(h.keeper.status().lastError).toMatchObject({ kind: 'server' });
    expect(retryWaits(h.lines).at(-1)).toBeLessThanOrEqual(1_000);
    h.endpoint.failWith = undefined;
    await advance(1_000);
    expect(h.keeper.status().ready).toBe(true);
  });
});

/**
 * A shared token store in memory (the Redis one is tested in test/token-store.test.ts): the
 * keeper's timing with a real coordinator, under fake timers.
 */
function memoryStore(): TokenSetStore {
  let generation = 0;
  let tokenSet: SharedTokenSet | undefined;
  let lease: { owner: string; until: number } | undefined;
  let owners = 0;
  const entry = (): StoredEntry => ({ generation, tokenSet, unreadable: false });
  const holds = (owner?: string) =>
    lease !== undefined &&
    Date.now() < lease.until &&
    (owner === undefined || lease.owner === owner);
  const keys = {} as EntryKeys;
  return {
    read: () => Promise.resolve({ entry: entry(), leaseHeld: holds() }),
    takeLease: (ttlMs) => {
      if (holds()) return Promise.resolve({ lease: undefined, entry: entry() });
      owners += 1;
      lease = { owner: `owner-${owners}`, until: Date.now() + ttlMs };
      return Promise.resolve({ lease: { owner: lease.owner, keys }, entry: entry() });
    },
    spendRefresh: (held) => Promise.resolve(holds(held.owner)),
    publish: (held, set, known) => {
      if (!holds(held.owner)) return Promise.resolve(undefined);
      generation = Math.max(generation, known) + 1;
      tokenSet = set;
      lease = undefined;
      return Promise.resolve(generation);
    },
    release: (held) => {
      if (holds(held.owner)) lease = undefined;
      return Promise.resolve();
    },
    deleteIfCurrent: (accessToken) => {
      const deleted = tokenSet?.accessToken === accessToken;
      if (deleted) tokenSet = undefined;
      return Promise.resolve({ deleted, entry: entry() });
    },
  };
}

/** A coordinator over `store` with the keeper tests' renewal settings (timeoutMs 1 s: lease 3 s). */
function sharedCoordinator(store: TokenSetStore): TokenCoordinator {
  return createTokenCoordinator({
    store,
    health: () => ({ url: 'memory', up: true, lastError: null }),
    settings: { refreshMarginSeconds: 60, refreshFraction: 0.2, timeoutMs: 1_000 },
    now: () => Date.now(),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    logger: createLogger({ level: 'silent' }),
  });
}

/** `store` with its reads counted (the watch's only command) and made to fail on demand. */
function countedReads(store: TokenSetStore) {
  const counted = { reads: 0, failReads: false };
  const wrapped: TokenSetStore = {
    ...store,
    read: () => {
      counted.reads += 1;
      if (counted.failReads) return Promise.reject(new StoreError('store down'));
      return store.read();
    },
  };
  return Object.assign(counted, { store: wrapped });
}

/** What a third process publishes: take the lease, write the set (as its coordinator would). */
async function publishAsAnotherProcess(
  store: TokenSetStore,
  accessToken: string,
  lifetimeSeconds = 600,
): Promise<void> {
  const { lease } = await store.takeLease(3_000);
  const set: SharedTokenSet = {
    accessToken,
    refreshToken: `${accessToken}-refresh`,
    sentAt: Date.now(),
    lifetimeSeconds,
    grant: 'client_credentials',
  };
  expect(await store.publish(lease!, set, 0)).toBeGreaterThan(0);
}

describe('TokenKeeper waiting out a backoff with a shared token store', () => {
  it('adopts a token another process publishes within one poll, not at its own retry (soak phase e: 503 for 1 s)', async () => {
    const memory = memoryStore();
    const counted = countedReads(memory);
    h.keeper.stop();
    h = setup({ random: WORST, coordinator: sharedCoordinator(counted.store) });
    // Another process is mid-renewal when this one starts: it waits for that lease holder...
    const { lease } = await memory.takeLease(3_000);
    h.keeper.start();
    const waiting = outcome(h.keeper.getAccessToken());
    await advance(500);
    // ...which leaves without a token (its grant failed): lease-lost, a retry after the backoff.
    await memory.release(lease!);
    await advance(LEASE_POLL_MS);
    expect(logLines().some((l) => l.errorKind === 'lease')).toBe(true);
    const retryAt = Date.parse(h.keeper.status().nextRenewalAt!);
    expect(retryAt - Date.now()).toBeGreaterThan(5 * LEASE_POLL_MS);

    // A third process renews meanwhile and publishes.
    await publishAsAnotherProcess(memory, 'shared-token-1');
    await advance(LEASE_POLL_MS);
    expect(Date.now()).toBeLessThan(retryAt);
    expect(h.keeper.status().ready).toBe(true);
    expect(await waiting).toBe('shared-token-1');
    expect(h.keeper.status()).toMatchObject({ ready: true, consecutiveFailures: 0 });
    expect(h.endpoint.requests).toHaveLength(0);
    expect(logLines().some((l) => l.outcome === 'adopted')).toBe(true);
    expect(await counter(h.registry, 'client_credentials', 'success')).toBe(0);
    // The watch ends with the adoption: no more store reads while the adopted token is valid.
    const reads = counted.reads;
    await advance(60_000);
    expect(counted.reads).toBe(reads);
    expect(h.endpoint.requests).toHaveLength(0);
  });

  it('bounded: no read while the held token is valid, at most one per 100 ms after its expiry, none after a store error', async () => {
    const memory = memoryStore();
    const counted = countedReads(memory);
    h.keeper.stop();
    h = setup({ random: WORST, coordinator: sharedCoordinator(counted.store) });
    h.endpoint.lifetimeSeconds = 20; // renewed at 10 s (half the lifetime), expires at 20 s
    h.keeper.start();
    await advance(0);
    expect(h.keeper.status().ready).toBe(true);
    h.endpoint.failWith = serverError();
    await advanceTo(10.5); // the renewal failed: a retry after the backoff, the token still valid
    expect(h.keeper.status().consecutiveFailures).toBeGreaterThan(0);
    const readsBefore = counted.reads;
    await advanceTo(19.99);
    // Retries take the lease (not a read); the watch reads nothing while the token is valid.
    expect(counted.reads).toBe(readsBefore);
    // After expiry: at most one read per poll interval, while the endpoint keeps failing.
    await advanceTo(29.99);
    const polled = counted.reads - readsBefore;
    expect(polled).toBeGreaterThan(0);
    expect(polled).toBeLessThanOrEqual(10_000 / LEASE_POLL_MS + 1);
    // The store fails a read: the watch stops until the next failure.
    counted.failReads = true;
    await advance(LEASE_POLL_MS);
    const failedAt = counted.reads;
    expect(failedAt).toBeGreaterThan(readsBefore + polled);
    const nextRetryAt = Date.parse(h.keeper.status().nextRenewalAt!);
    await advance(nextRetryAt - Date.now() - 1);
    expect(counted.reads).toBe(failedAt);
    // And the token a process publishes is adopted once the store reads again.
    counted.failReads = false;
    await publishAsAnotherProcess(memory, 'shared-token-2');
    await advance(RECOVERY_CAP_MS + LEASE_POLL_MS);
    expect(await h.keeper.getAccessToken()).toBe('shared-token-2');
  });
});

describe('TokenKeeper recovery with a shared token store', () => {
  it('two processes, 503 with Retry-After: 3000000 forever: whoever holds the lease or waits for it, every wait ≤ 8 s; both serve within 8 s of the fix', async () => {
    const store = memoryStore();
    h.keeper.stop();
    h = setup({ random: WORST, coordinator: sharedCoordinator(store) });
    const other = setup({ random: WORST, coordinator: sharedCoordinator(store) });
    try {
      for (const p of [h, other]) p.endpoint.failWith = serverError(3_000_000_000);
      h.keeper.start();
      other.keeper.start();
      await advance(120_000);
      // The second one first waited for the first one's lease, which left without a token.
      const kinds = other.lines.map((l) => (JSON.parse(l) as { errorKind?: string }).errorKind);
      expect(kinds).toContain('lease');
      for (const p of [h, other]) {
        expect(p.keeper.status().consecutiveFailures).toBeGreaterThanOrEqual(10);
        expect(retryWaits(p.lines).length).toBeGreaterThanOrEqual(10);
        expect(Math.max(...retryWaits(p.lines))).toBeLessThanOrEqual(RECOVERY_CAP_MS);
        expect(busiestWindow(p.endpoint.requests.map((r) => r.at))).toBeLessThanOrEqual(10);
        p.endpoint.failWith = undefined;
      }
      // The lease holder's followers wait out one lease (3 s) at most, then retry within 8 s.
      await advance(RECOVERY_CAP_MS + 3_000);
      expect([h.keeper.status().ready, other.keeper.status().ready]).toEqual([true, true]);
    } finally {
      other.keeper.stop();
    }
  });
});
