/**
 * How the proxy sees the token keeper (docs/design.md "Module boundaries": `{ getAccessToken(), invalidate(token) }`).
 * The keeper satisfies it structurally; proxy/ never imports token/.
 */
export interface AccessTokenSource {
  /** Resolves with a valid access token, or rejects with a SidecarError (`token_unavailable`). */
  getAccessToken(): Promise<string>;
  /**
   * The valid token held right now, if any, without waiting: the forwarder tries it first and
   * calls `getAccessToken()` only when it is undefined. Optional: a source without it is asked
   * through `getAccessToken()` every time.
   */
  currentToken?(): string | undefined;
  /**
   * The upstream answered 401 to `token`. `replay`: a newer token is current; `renewing`: `token`
   * was dropped and a renewal runs; `keep`: `token` is kept, a replay would carry it again.
   */
  invalidate(token: string): 'replay' | 'renewing' | 'keep';
}
