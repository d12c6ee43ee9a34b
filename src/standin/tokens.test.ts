import { describe, expect, it } from 'vitest';
import { TokenStore } from './tokens.js';

function store(lifetimeSeconds = 60) {
  const clock = { now: 1_000_000 };
  return { clock, tokens: new TokenStore(() => clock.now, lifetimeSeconds) };
}

describe('TokenStore', () => {
  it('issues unguessable, distinct, prefixed tokens and remembers every one', () => {
    const { tokens } = store();
    const a = tokens.issue(true);
    const b = tokens.issue(false);
    expect(a.accessToken).toMatch(/^at_[\w-]{43}$/);
    expect(a.refreshToken).toMatch(/^rt_[\w-]{43}$/);
    expect(b.refreshToken).toBeUndefined();
    expect(new Set([a.accessToken, b.accessToken]).size).toBe(2);
    expect(a.expiresIn).toBe(60);
    expect(tokens.issued()).toEqual([a.accessToken, a.refreshToken, b.accessToken]);
  });

  it('an access token is valid until its lifetime ends, by the injected clock', () => {
    const { clock, tokens } = store(60);
    const { accessToken } = tokens.issue(false);
    clock.now += 59_999;
    expect(tokens.accessTokenValid(accessToken)).toBe(true);
    clock.now += 1;
    expect(tokens.accessTokenValid(accessToken)).toBe(false);
    expect(tokens.accessTokenValid('at_unknown')).toBe(false);
  });

  it('a changed lifetime applies to tokens issued from then on', () => {
    const { tokens } = store(60);
    tokens.lifetimeSeconds = 5;
    expect(tokens.issue(false).expiresIn).toBe(5);
  });

  it('a refresh token is spent once; unknown or revoked ones never', () => {
    const { tokens } = store();
    const first = tokens.issue(true).refreshToken!;
    expect(tokens.useRefreshToken(first)).toBe(true);
    expect(tokens.useRefreshToken(first)).toBe(false);
    expect(tokens.useRefreshToken('rt_unknown')).toBe(false);
    const second = tokens.issue(true).refreshToken!;
    tokens.revokeRefreshTokens();
    expect(tokens.useRefreshToken(second)).toBe(false);
  });

  it('revoking access tokens rejects every one issued so far, not later ones', () => {
    const { tokens } = store();
    const old = tokens.issue(false).accessToken;
    tokens.revokeAccessTokens();
    const fresh = tokens.issue(false).accessToken;
    expect(tokens.accessTokenValid(old)).toBe(false);
    expect(tokens.accessTokenValid(fresh)).toBe(true);
  });
});
