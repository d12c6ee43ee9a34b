/** What the keeper holds: validity at a time, the refresh token rules (RFC 6749 §6), the store's view. */
import { describe, expect, it } from 'vitest';
import { HeldTokens } from './held-token.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

describe('HeldTokens', () => {
  it('holds nothing at first', () => {
    const held = new HeldTokens();
    expect(held.valid(T0)).toBeUndefined();
    expect(held.ref()).toBeUndefined();
    expect(held.lastGrant).toBeUndefined();
  });

  it('a held token is valid from its request until sentAt + lifetime, not at that instant', () => {
    const held = new HeldTokens();
    held.hold('access-1', T0, 60, 'client_credentials');
    expect(held.current).toEqual({
      accessToken: 'access-1',
      sentAt: T0,
      expiresAt: T0 + 60_000,
      lifetimeSeconds: 60,
    });
    expect(held.lastGrant).toBe('client_credentials');
    expect(held.valid(T0 + 59_999)).toBe('access-1');
    expect(held.valid(T0 + 60_000)).toBeUndefined();
    expect(held.ref()).toEqual({ accessToken: 'access-1', expiresAt: T0 + 60_000 });
  });

  it('a refresh token in an answer: a string replaces, null drops, absent keeps', () => {
    const held = new HeldTokens();
    held.received('refresh-1');
    expect(held.refreshToken).toBe('refresh-1');
    held.received(undefined);
    expect(held.refreshToken).toBe('refresh-1');
    held.received('refresh-2');
    expect(held.refreshToken).toBe('refresh-2');
    held.received(null);
    expect(held.refreshToken).toBeUndefined();
  });

  it('a rejected refresh token is forgotten only while it is still the one held', () => {
    const held = new HeldTokens();
    held.received('refresh-2');
    held.dropRefresh('refresh-1');
    expect(held.refreshToken).toBe('refresh-2');
    held.dropRefresh('refresh-2');
    expect(held.refreshToken).toBeUndefined();
  });

  it('the store’s view carries no refresh token', () => {
    const held = new HeldTokens();
    held.received('refresh-1');
    held.hold('access-1', T0, 1, 'refresh_token');
    expect(JSON.stringify(held.ref())).not.toContain('refresh-1');
  });
});
