/** Types shared by the token endpoint client and the keeper. camelCase inside, whatever the wire said. */
import type { ClientCredentials } from '../config/types.js';

export type GrantType = 'client_credentials' | 'refresh_token';

// The credential types belong to config/ (which reads them); re-exported for token/'s own modules.
export type { ClientCredentials, CredentialsReader } from '../config/types.js';

/** A validated token endpoint answer (STYLE.md 1: the checker returns this). */
export interface TokenSet {
  accessToken: string;
  /** Always lower-cased `bearer`: anything else is rejected by the checker. */
  tokenType: 'bearer';
  /** Lifetime in seconds from the moment the request was sent. */
  expiresInSeconds: number;
  /** True when the answer had no `expiresIn` and the default lifetime was assumed. */
  lifetimeDefaulted: boolean;
  /**
   * string: replaces the held refresh token; null: drop it (the API's "about to expire" signal);
   * undefined: absent from the answer, keep the held one (RFC 6749 §6).
   */
  refreshToken: string | null | undefined;
}

/** One grant request, as the keeper asks for it. */
export type GrantRequest =
  | { grant: 'client_credentials'; credentials: ClientCredentials }
  | { grant: 'refresh_token'; refreshToken: string };

/** The token endpoint as the keeper sees it: send + check in one call; rejects with TokenEndpointError. */
export interface TokenEndpoint {
  requestToken(request: GrantRequest): Promise<TokenSet>;
}
