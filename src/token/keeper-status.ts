/**
 * What the keeper reports (docs/design.md "Token keeper"): the `/status` snapshot and how it is
 * computed at a given time, the kind of the last error, and the 503 a caller gets after waiting
 * for a token. Never a token or a secret.
 */
import { CredentialsReadError, TokenEndpointError, TokenUnavailableError } from '../errors.js';
import { LeaseWaitError } from './coordination.js';
import type { HeldToken } from './held-token.js';
import type { GrantType } from './types.js';

/** What went wrong last: a token endpoint error kind, or the credentials could not be read. */
export type KeeperErrorKind =
  | TokenEndpointError['kind']
  | 'credentials'
  | 'internal'
  /** Another process held the renewal lease and left without a new token. */
  | 'lease';

/**
 * The keeper's one status snapshot, read by `/status`, `/readyz` and the token gauges. JSON-safe;
 * never holds a token or a secret.
 */
export interface KeeperStatus {
  /** A token is held and `now < expiresAt`. */
  ready: boolean;
  /** Grant of the most recent successful token request. */
  lastGrant: GrantType | null;
  /** Seconds since the current token's request was sent; null when none is held. */
  tokenAgeSeconds: number | null;
  /** Seconds until the current token expires; 0 when none is held. */
  expiresInSeconds: number;
  lifetimeSeconds: number | null;
  /** Next scheduled token request (renewal, or retry after a failure), ISO 8601. */
  nextRenewalAt: string | null;
  refreshTokenHeld: boolean;
  lastError: { kind: KeeperErrorKind; message: string; at: string } | null;
  consecutiveFailures: number;
  requestInFlight: boolean;
}

export function errorKind(error: unknown): KeeperErrorKind {
  if (error instanceof TokenEndpointError) return error.kind;
  if (error instanceof CredentialsReadError) return 'credentials';
  if (error instanceof LeaseWaitError) return 'lease';
  return 'internal';
}

/** A time (ms since the epoch) as `/status` and the log lines show it: ISO 8601. */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** The status snapshot; the held token's times as seen at `now`. */
export function statusOf(
  now: number,
  held: { current: HeldToken | undefined; lastGrant: GrantType | undefined; refreshToken?: string },
  rest: Pick<
    KeeperStatus,
    'nextRenewalAt' | 'lastError' | 'consecutiveFailures' | 'requestInFlight'
  >,
): KeeperStatus {
  const token = held.current;
  return {
    ready: token !== undefined && now < token.expiresAt,
    lastGrant: held.lastGrant ?? null,
    tokenAgeSeconds: token === undefined ? null : Math.max(0, (now - token.sentAt) / 1_000),
    expiresInSeconds: token === undefined ? 0 : Math.max(0, (token.expiresAt - now) / 1_000),
    lifetimeSeconds: token?.lifetimeSeconds ?? null,
    nextRenewalAt: rest.nextRenewalAt,
    refreshTokenHeld: held.refreshToken !== undefined,
    lastError: rest.lastError,
    consecutiveFailures: rest.consecutiveFailures,
    requestInFlight: rest.requestInFlight,
  };
}

/** What a caller that waited `waitMs` for a token gets. */
export function unavailableError(
  waitMs: number,
  lastError: KeeperStatus['lastError'],
  retryAfterSeconds: number,
): TokenUnavailableError {
  const reason =
    lastError === null
      ? 'no token yet'
      : `last token endpoint error: ${lastError.kind}: ${lastError.message}`;
  return new TokenUnavailableError(
    `no valid access token within ${waitMs} ms (${reason})`,
    retryAfterSeconds,
  );
}
