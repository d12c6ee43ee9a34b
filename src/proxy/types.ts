/**
 * How the proxy sees the token keeper (DESIGN.md: `{ getAccessToken(), invalidate(token) }`).
 * The keeper satisfies it structurally; proxy/ never imports token/.
 */
export interface AccessTokenSource {
  /** Resolves with a valid access token, or rejects with a SidecarError (`token_unavailable`). */
  getAccessToken(): Promise<string>;
  /**
   * The upstream answered 401 to `token`. If it is still the current token, it is dropped and a
   * renewal starts (at most one forced renewal per 5 s, never against backoff). Returns true when a
   * replay would not carry `token` again: it gets a newer token, waits for one, or is answered 503
   * `token_unavailable`.
   */
  invalidate(token: string): boolean;
}
