import { randomBytes } from 'node:crypto';

/** 32 random bytes: unguessable, and the prefix tells a log reader which kind leaked. */
function newToken(prefix: 'at_' | 'rt_'): string {
  return prefix + randomBytes(32).toString('base64url');
}

interface AccessRecord {
  expiresAt: number;
  revoked: boolean;
}

interface RefreshRecord {
  used: boolean;
  revoked: boolean;
}

export interface IssuedSet {
  accessToken: string;
  /** undefined when the answer carries no new refresh token. */
  refreshToken: string | undefined;
  expiresIn: number;
}

/** Every token the stand-in issued, and whether it is still good. */
export class TokenStore {
  private readonly access = new Map<string, AccessRecord>();
  private readonly refresh = new Map<string, RefreshRecord>();
  private readonly all: string[] = [];

  constructor(
    private readonly now: () => number,
    public lifetimeSeconds: number,
  ) {}

  issue(withRefreshToken: boolean): IssuedSet {
    const accessToken = newToken('at_');
    const expiresIn = this.lifetimeSeconds;
    this.access.set(accessToken, { expiresAt: this.now() + expiresIn * 1000, revoked: false });
    this.all.push(accessToken);
    let refreshToken: string | undefined;
    if (withRefreshToken) {
      refreshToken = newToken('rt_');
      this.refresh.set(refreshToken, { used: false, revoked: false });
      this.all.push(refreshToken);
    }
    return { accessToken, refreshToken, expiresIn };
  }

  /** Issued, not expired, not revoked. */
  accessTokenValid(token: string): boolean {
    const record = this.access.get(token);
    return record !== undefined && !record.revoked && this.now() < record.expiresAt;
  }

  /**
   * Spend a refresh token. Single use: rotation makes a client that reuses an old one fail
   * visibly instead of passing by luck.
   */
  useRefreshToken(token: string): boolean {
    const record = this.refresh.get(token);
    if (record === undefined || record.used || record.revoked) return false;
    record.used = true;
    return true;
  }

  revokeAccessTokens(): void {
    for (const record of this.access.values()) record.revoked = true;
  }

  revokeRefreshTokens(): void {
    for (const record of this.refresh.values()) record.revoked = true;
  }

  issued(): string[] {
    return [...this.all];
  }
}
