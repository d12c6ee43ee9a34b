/**
 * The embedded stand-in of the commodities API: the tests' counterpart and the `demo` upstream.
 * Implements the API of `docs/api-notes.md` over HTTPS with a throwaway CA.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { CallerTokenClaims } from './issuer.js';

export type { CallerTokenClaims } from './issuer.js';

/** A throwaway CA and a server certificate for 127.0.0.1, ::1 and localhost, all PEM. */
export interface TestPki {
  caCert: string;
  serverCert: string;
  serverKey: string;
}

/** A misbehaviour of the token endpoint, injected by tests. */
export type TokenFault =
  /** Answer with this status (e.g. 500, 503 + Retry-After, 400 with an OAuth error body). */
  | {
      kind: 'status';
      status: number;
      body?: string;
      contentType?: string;
      retryAfter?: string;
      /** The answer's `Date`: this far from the stand-in's clock (ms); null sends none. */
      dateOffsetMs?: number | null;
      /** An `Age` header, as a cache in between would add. */
      age?: string;
    }
  /** Destroy the socket without answering. */
  | { kind: 'reset' }
  /** Never answer (until the server closes). */
  | { kind: 'hang' }
  /** Answer normally, after a delay. */
  | { kind: 'delay'; ms: number }
  /** 200 with an HTML error page. */
  | { kind: 'html' }
  /** 201 JSON without the access token. */
  | { kind: 'missing-access-token' }
  /** 201 JSON whose access token is this string (e.g. one with CR/LF or a space). */
  | { kind: 'access-token'; value: string }
  /** 201 JSON with this token type (e.g. "mac"). */
  | { kind: 'token-type'; tokenType: string }
  /** 201 JSON with this expiresIn (e.g. -5, "abc"); `omit: true` leaves the field out. */
  | { kind: 'expires-in'; value?: unknown; omit?: boolean }
  /** 201 with a JSON-ish body of this many bytes. */
  | { kind: 'huge'; bytes: number }
  /** 302 to this location. */
  | { kind: 'redirect'; location: string };

export interface StandinOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (any free port). */
  port?: number;
  /** Default `demo-client`. */
  clientId?: string;
  /** Default `demo-secret`. */
  clientSecret?: string;
  /** `expiresIn` of issued tokens, seconds. Default 1799 (the API's own sample). */
  tokenLifetimeSeconds?: number;
  /** Status of successful token answers. Default 201, as the API does. */
  tokenStatus?: 200 | 201;
  /** Serve HTTP/2 as well (ALPN h2 + http/1.1). Default false. */
  http2?: boolean;
  /** Generated when absent. */
  pki?: TestPki;
  /** Token issue and expiry times, delays. Default: the system clock. */
  clock?: Clock;
  /** Debug lines per token request; nothing is logged when absent. */
  logger?: Logger;
  /**
   * The caller-token signing key (EC P-256, PKCS#8 PEM) of the stand-in as issuer; generated when
   * absent. Give the same one to keep tokens valid across stand-ins.
   */
  callerKeyPem?: string;
  /** Discovery and keys want `Authorization: Bearer <this>`, as the Kubernetes API server. */
  issuerReaderToken?: string;
}

export interface RecordedIssuerRequest {
  at: number;
  /** `/.well-known/openid-configuration` or `/openid/v1/jwks`. */
  path: string;
  status: number;
}

export interface RecordedTokenRequest {
  at: number;
  format: 'json' | 'form' | 'other';
  /** As sent on the wire (`clientCredentials`, `client_credentials`, `refreshToken`, ...), normalised to these two when recognised. */
  grant: 'client_credentials' | 'refresh_token' | (string & {});
  auth: 'body' | 'basic' | 'none';
  clientId: string | undefined;
  /** Whether the presented secret matched the current one (the secret itself is not kept). */
  secretOk: boolean;
  /** `scopes` (JSON) or `scope` (form) as received. */
  scopes: string | undefined;
  refreshToken: string | undefined;
  outcome: 'issued' | 'rejected' | 'fault';
  status: number | undefined;
}

export interface RecordedApiRequest {
  at: number;
  method: string;
  /** The raw request target. */
  url: string;
  headers: IncomingHttpHeaders;
  /** The bearer presented, if any. */
  token: string | undefined;
  bodyBytes: number;
  bodySha256: string;
  status: number;
  httpVersion: string;
}

export interface Standin {
  /** `https://127.0.0.1:PORT` — the upstream base URL. */
  readonly url: string;
  readonly port: number;
  /** PEM of the throwaway CA that signed the server certificate. */
  readonly caCert: string;
  readonly tokenRequests: RecordedTokenRequest[];
  readonly apiRequests: RecordedApiRequest[];
  /** Discovery and JWKS requests, in order. */
  readonly issuerRequests: RecordedIssuerRequest[];
  /**
   * As an issuer of caller tokens (docs/security.md "Caller identity on the shared gateway"),
   * `url` is its `iss`: discovery at `url/.well-known/openid-configuration`, keys at
   * `url/openid/v1/jwks`.
   */
  readonly caller: {
    /** The signing key, PKCS#8 PEM (for `callerKeyPem` of a later stand-in). */
    readonly keyPem: string;
    readonly kid: string;
    /** The JWKS served. */
    readonly jwks: { keys: Record<string, unknown>[] };
    /** A token of this stand-in for `claims`, issued now by its clock. */
    mint(claims: CallerTokenClaims): Promise<string>;
    /** Require this bearer to read discovery and keys from now on; undefined: anyone may. */
    setReaderToken(token: string | undefined): void;
  };
  /** Every access and refresh token ever issued (for tests that grep logs for them). */
  issuedTokens(): string[];
  /** Whether the API would accept this access token now (issued, not expired, not revoked). */
  accessTokenValid(token: string): boolean;
  /** Rotate the client secret: old one rejected with 401 from now on. */
  setClientSecret(secret: string): void;
  setTokenLifetime(seconds: number): void;
  /** The next `count` successful answers carry `refreshToken: null`. */
  nullRefreshTokenNext(count?: number): void;
  /** The next `count` successful answers leave the refresh token out. */
  omitRefreshTokenNext(count?: number): void;
  /** The next `times` token requests suffer `fault` (default once; Infinity = until cleared). */
  failTokenRequests(fault: TokenFault, times?: number): void;
  /** Each token request suffers `fault` with probability `ratio` (soak tests); 0 turns it off. */
  failTokenRequestsRandomly(fault: TokenFault, ratio: number): void;
  clearTokenFaults(): void;
  /**
   * Every API request whose path starts with `prefix` is answered with `status` (a maintenance
   * window: 503), with `Retry-After` when given, until cleared.
   */
  failApiRequests(prefix: string, status: number, retryAfter?: string): void;
  clearApiFaults(): void;
  /** Every issued access token is rejected by the API from now on (401). */
  revokeAccessTokens(): void;
  /** Every issued refresh token is rejected by the token endpoint from now on (400 invalid_grant). */
  revokeRefreshTokens(): void;
  close(): Promise<void>;
}
