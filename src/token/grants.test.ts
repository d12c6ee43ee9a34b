/**
 * One grant as the keeper runs it, against a hand-made endpoint: which grant, the fallback from a
 * dead refresh token, the rate ceiling, what is counted, and the coordinator's results as data.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import { CredentialsReadError, TokenEndpointError, TokenUnavailableError } from '../errors.js';
import { LeaseWaitError, type TokenCoordinator } from './coordination.js';
import { Grants, type GrantMetrics } from './grants.js';
import { HeldTokens } from './held-token.js';
import { RequestCeiling } from './schedule.js';
import type { GrantRequest, TokenSet } from './types.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const credentials = { clientId: 'client-a', clientSecret: 'secret-a' };

function tokenSet(accessToken: string): TokenSet {
  return {
    accessToken,
    tokenType: 'bearer',
    expiresInSeconds: 600,
    lifetimeDefaulted: false,
    refreshToken: undefined,
  };
}

function rejected(): TokenEndpointError {
  return new TokenEndpointError('rejected', 'token endpoint answered 400 invalid_grant', {
    status: 400,
  });
}

function setup(
  answers: ((request: GrantRequest) => Promise<TokenSet>)[],
  ceiling = new RequestCeiling(),
) {
  const requests: GrantRequest[] = [];
  const counted: { grant: string; outcome: string }[] = [];
  const durations: number[] = [];
  const spans: { grant: string; outcome?: string }[] = [];
  const failures: { grant: string; next: string }[] = [];
  const held = new HeldTokens();
  const state = { stopped: false };
  const readCredentials = vi.fn(() => Promise.resolve(credentials));
  const metrics = {
    tokenRequests: { inc: (labels: { grant: string; outcome: string }) => counted.push(labels) },
    tokenRequestDuration: { observe: (_: unknown, seconds: number) => durations.push(seconds) },
  } as unknown as GrantMetrics;
  const grants = new Grants({
    endpoint: {
      requestToken: (request) => {
        requests.push(request);
        const answer = answers.shift();
        return answer === undefined
          ? Promise.reject(new Error('no answer scripted'))
          : answer(request);
      },
    },
    readCredentials,
    metrics,
    traceGrant: (grant) => {
      const span: { grant: string; outcome?: string } = { grant };
      spans.push(span);
      return { end: (outcome) => (span.outcome = outcome) };
    },
    clock: systemClock,
    ceiling,
    isStopped: () => state.stopped,
    held,
    logFailure: (grant, _error, next) => failures.push({ grant, next }),
  });
  return { grants, requests, counted, durations, spans, failures, held, state, readCredentials };
}

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Grants.obtain', () => {
  it('no refresh token: client credentials, sent at the time the request left', async () => {
    const h = setup([
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        return tokenSet('access-1');
      },
    ]);
    const progress = { grant: 'refresh_token' as const } as {
      grant: 'client_credentials' | 'refresh_token';
    };
    const pending = h.grants.obtain(progress, { kind: 'local' });
    await vi.advanceTimersByTimeAsync(1_500);
    const outcome = await pending;
    expect(outcome).toEqual({
      ok: true,
      grant: 'client_credentials',
      tokenSet: tokenSet('access-1'),
      sentAt: T0,
    });
    expect(progress.grant).toBe('client_credentials');
    expect(h.requests).toEqual([{ grant: 'client_credentials', credentials }]);
    expect(h.counted).toEqual([{ grant: 'client_credentials', outcome: 'success' }]);
    expect(h.durations).toEqual([1.5]);
    expect(h.spans).toEqual([{ grant: 'client_credentials', outcome: 'success' }]);
  });

  it('a held refresh token is used; the fleet’s one instead while the lease is held', async () => {
    const h = setup([() => Promise.resolve(tokenSet('a1')), () => Promise.resolve(tokenSet('a2'))]);
    h.held.received('refresh-own');
    await h.grants.obtain({ grant: 'client_credentials' }, { kind: 'local' });
    await h.grants.obtain(
      { grant: 'client_credentials' },
      { kind: 'shared', refreshToken: 'refresh-fleet' },
    );
    expect(h.requests).toEqual([
      { grant: 'refresh_token', refreshToken: 'refresh-own' },
      { grant: 'refresh_token', refreshToken: 'refresh-fleet' },
    ]);
    expect(h.readCredentials).not.toHaveBeenCalled();
  });

  it('a rejected refresh token is dropped and client credentials run at once', async () => {
    const h = setup([() => Promise.reject(rejected()), () => Promise.resolve(tokenSet('a1'))]);
    h.held.received('refresh-dead');
    const outcome = await h.grants.obtain({ grant: 'client_credentials' }, { kind: 'local' });
    expect(outcome.ok).toBe(true);
    expect(h.held.refreshToken).toBeUndefined();
    expect(h.requests.map((r) => r.grant)).toEqual(['refresh_token', 'client_credentials']);
    expect(h.counted).toEqual([
      { grant: 'refresh_token', outcome: 'rejected' },
      { grant: 'client_credentials', outcome: 'success' },
    ]);
    expect(h.failures).toEqual([
      { grant: 'refresh_token', next: 'falling back to client credentials' },
    ]);
  });

  it('a refresh failure that is no rejection is returned as is: no fallback', async () => {
    const h = setup([
      () => Promise.reject(new TokenEndpointError('server', '503', { status: 503 })),
    ]);
    h.held.received('refresh-1');
    const outcome = await h.grants.obtain({ grant: 'client_credentials' }, { kind: 'local' });
    expect(outcome).toMatchObject({ ok: false, grant: 'refresh_token' });
    expect(h.held.refreshToken).toBe('refresh-1');
    expect(h.requests).toHaveLength(1);
    expect(h.counted).toEqual([{ grant: 'refresh_token', outcome: 'error' }]);
  });

  it('with the rate ceiling reached, the rejected refresh is returned and the retry falls back', async () => {
    const ceiling = new RequestCeiling(2, 10_000);
    ceiling.record(T0);
    const h = setup([() => Promise.reject(rejected())], ceiling);
    h.held.received('refresh-dead');
    const outcome = await h.grants.obtain({ grant: 'client_credentials' }, { kind: 'local' });
    expect(outcome).toMatchObject({ ok: false, grant: 'refresh_token' });
    expect(h.requests).toHaveLength(1);
    expect(h.held.refreshToken).toBeUndefined();
    expect(h.failures).toEqual([]);
  });

  it('a stopped keeper sends nothing', async () => {
    const h = setup([]);
    h.state.stopped = true;
    const outcome = await h.grants.obtain({ grant: 'client_credentials' }, { kind: 'local' });
    expect(outcome).toMatchObject({ ok: false });
    expect(!outcome.ok && outcome.error).toBeInstanceOf(TokenUnavailableError);
    expect(h.requests).toEqual([]);
  });

  it('unreadable credentials: no request, a CredentialsReadError', async () => {
    const h = setup([]);
    h.readCredentials.mockRejectedValueOnce(new Error('ENOENT: no such file'));
    const outcome = await h.grants.obtain({ grant: 'client_credentials' }, { kind: 'local' });
    expect(!outcome.ok && outcome.error).toBeInstanceOf(CredentialsReadError);
    expect(h.requests).toEqual([]);
    expect(h.counted).toEqual([]);
  });
});

describe('Grants.run', () => {
  function coordinator(result: unknown): TokenCoordinator {
    return {
      obtain: async (_request, grant) => {
        if (result === 'grant-shared') {
          return {
            kind: 'granted',
            outcome: await grant({ kind: 'shared', refreshToken: undefined }),
            refreshToken: 'r-fleet',
            shared: true,
          };
        }
        if (result === 'throw') throw new Error('coordinator bug');
        return result as never;
      },
      peek: () => Promise.resolve(undefined),
      status: () => ({ url: 'redis://x', up: true, lastError: null, generation: null }),
    };
  }

  it('without a store: the process’s own grant', async () => {
    const h = setup([() => Promise.resolve(tokenSet('a1'))]);
    const result = await h.grants.run(undefined, undefined, undefined);
    expect(result.outcome.ok).toBe(true);
    expect(result.adopted).toBeUndefined();
    expect(result.sharedRefresh).toBeUndefined();
  });

  it('under the lease: the grant’s outcome and the fleet’s refresh token', async () => {
    const h = setup([() => Promise.resolve(tokenSet('a1'))]);
    const result = await h.grants.run(coordinator('grant-shared'), undefined, 'access-rejected');
    expect(result.outcome.ok).toBe(true);
    expect(result.sharedRefresh).toEqual({ refreshToken: 'r-fleet' });
  });

  it('an adopted set, a lost lease and a throwing coordinator come back as data', async () => {
    const set = {
      accessToken: 'a9',
      refreshToken: undefined,
      sentAt: T0,
      lifetimeSeconds: 60,
      grant: 'client_credentials' as const,
    };
    const h = setup([]);
    const adopted = await h.grants.run(
      coordinator({ kind: 'adopted', tokenSet: set, generation: 4 }),
      undefined,
      undefined,
    );
    expect(adopted.adopted).toEqual({ kind: 'adopted', tokenSet: set, generation: 4 });
    expect(adopted.outcome.ok).toBe(false);

    const lost = new LeaseWaitError('the lease holder left');
    const leaseLost = await h.grants.run(
      coordinator({ kind: 'lease-lost', error: lost }),
      undefined,
      undefined,
    );
    expect(leaseLost.outcome).toEqual({ ok: false, grant: 'client_credentials', error: lost });

    const thrown = await h.grants.run(coordinator('throw'), undefined, undefined);
    expect(thrown.outcome).toMatchObject({ ok: false, error: new Error('coordinator bug') });
    expect(h.requests).toEqual([]);
  });
});
