/**
 * What the keeper holds: the current access token with its times, the process's own refresh
 * token, and the grant that obtained the latest one. Never logged; `/status` reads only times.
 */
import type { HeldRef } from './coordination.js';
import type { GrantType, TokenSet } from './types.js';

/** The current access token and its times (never logged; `/status` reads only the times). */
export interface HeldToken {
  accessToken: string;
  sentAt: number;
  expiresAt: number;
  lifetimeSeconds: number;
}

export class HeldTokens {
  current: HeldToken | undefined;
  refreshToken: string | undefined;
  lastGrant: GrantType | undefined;

  /** The current token while `now` is before its expiry. */
  valid(now: number): string | undefined {
    const held = this.current;
    if (held === undefined || now >= held.expiresAt) return undefined;
    return held.accessToken;
  }

  /** Makes `accessToken` the current token, valid for `lifetimeSeconds` from `sentAt`. */
  hold(accessToken: string, sentAt: number, lifetimeSeconds: number, grant: GrantType): void {
    this.current = {
      accessToken,
      sentAt,
      expiresAt: sentAt + lifetimeSeconds * 1_000,
      lifetimeSeconds,
    };
    this.lastGrant = grant;
  }

  /**
   * The refresh token of a grant's answer. A string replaces the held one (refresh tokens may be
   * single-use, so only the newest is kept); null is the API's "about to expire" signal, drop it;
   * absent keeps the held one (RFC 6749 §6).
   */
  received(refreshToken: TokenSet['refreshToken']): void {
    if (typeof refreshToken === 'string') this.refreshToken = refreshToken;
    else if (refreshToken === null) this.refreshToken = undefined;
  }

  /** `token` was rejected: forget it if it is still the one held. */
  dropRefresh(token: string): void {
    if (this.refreshToken === token) this.refreshToken = undefined;
  }

  /** The held token as the coordinator compares it with the store's (no refresh token). */
  ref(): HeldRef | undefined {
    const held = this.current;
    return held === undefined
      ? undefined
      : { accessToken: held.accessToken, expiresAt: held.expiresAt };
  }
}
