/** What the keeper reports: the status snapshot at a time, the last error's kind, the 503 after a wait. */
import { describe, expect, it } from 'vitest';
import { CredentialsReadError, TokenEndpointError, TokenUnavailableError } from '../errors.js';
import { LeaseWaitError } from './coordination.js';
import { errorKind, iso, statusOf, unavailableError } from './keeper-status.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const rest = {
  nextRenewalAt: null,
  lastError: null,
  consecutiveFailures: 0,
  requestInFlight: false,
};

describe('statusOf', () => {
  it('nothing held: not ready, no age, nothing left of a lifetime', () => {
    expect(statusOf(T0, { current: undefined, lastGrant: undefined }, rest)).toEqual({
      ready: false,
      lastGrant: null,
      tokenAgeSeconds: null,
      expiresInSeconds: 0,
      lifetimeSeconds: null,
      nextRenewalAt: null,
      refreshTokenHeld: false,
      lastError: null,
      consecutiveFailures: 0,
      requestInFlight: false,
    });
  });

  it('a held token’s age and remaining time are seen at `now`; ready ends at its expiry', () => {
    const current = {
      accessToken: 'access-1',
      sentAt: T0,
      expiresAt: T0 + 60_000,
      lifetimeSeconds: 60,
    };
    const held = { current, lastGrant: 'refresh_token' as const, refreshToken: 'refresh-1' };
    const at = (now: number) => statusOf(now, held, { ...rest, consecutiveFailures: 2 });
    expect(at(T0 + 15_000)).toMatchObject({
      ready: true,
      lastGrant: 'refresh_token',
      tokenAgeSeconds: 15,
      expiresInSeconds: 45,
      lifetimeSeconds: 60,
      refreshTokenHeld: true,
      consecutiveFailures: 2,
    });
    expect(at(T0 + 59_999).ready).toBe(true);
    expect(at(T0 + 60_000)).toMatchObject({
      ready: false,
      expiresInSeconds: 0,
      tokenAgeSeconds: 60,
    });
    // A clock behind the token's send time shows age 0, never a negative one.
    expect(at(T0 - 1_000).tokenAgeSeconds).toBe(0);
  });

  it('never carries the token or the refresh token', () => {
    const current = {
      accessToken: 'access-xyz',
      sentAt: T0,
      expiresAt: T0 + 1_000,
      lifetimeSeconds: 1,
    };
    const text = JSON.stringify(
      statusOf(T0, { current, lastGrant: 'client_credentials', refreshToken: 'refresh-xyz' }, rest),
    );
    expect(text).not.toContain('access-xyz');
    expect(text).not.toContain('refresh-xyz');
  });
});

describe('errorKind', () => {
  it('names the token endpoint error’s kind, unreadable credentials, a lost lease, else internal', () => {
    expect(errorKind(new TokenEndpointError('rejected', 'x'))).toBe('rejected');
    expect(errorKind(new TokenEndpointError('timeout', 'x'))).toBe('timeout');
    expect(errorKind(new CredentialsReadError(new Error('ENOENT')))).toBe('credentials');
    expect(errorKind(new LeaseWaitError('gone'))).toBe('lease');
    expect(errorKind(new Error('bug'))).toBe('internal');
    expect(errorKind(undefined)).toBe('internal');
  });
});

describe('unavailableError', () => {
  it('says how long the caller waited and why, with the seconds until the next attempt', () => {
    const none = unavailableError(5_000, null, 3);
    expect(none).toBeInstanceOf(TokenUnavailableError);
    expect(none.message).toBe('no valid access token within 5000 ms (no token yet)');
    expect(none.retryAfterSeconds).toBe(3);
    const last = { kind: 'server' as const, message: 'token endpoint answered 503', at: iso(T0) };
    expect(unavailableError(250, last, 7).message).toBe(
      'no valid access token within 250 ms (last token endpoint error: server: token endpoint answered 503)',
    );
  });
});

describe('iso', () => {
  it('is ISO 8601 in UTC with milliseconds', () => {
    expect(iso(T0 + 1)).toBe('2030-01-01T00:00:00.001Z');
  });
});
