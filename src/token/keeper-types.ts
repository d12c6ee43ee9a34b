/** The token keeper's options, status and the shapes its parts share (keeper.ts). */
import type { Clock, LongTimer } from '../clock.js';
import type { Config } from '../config/types.js';
import { CredentialsReadError, TokenEndpointError, TokenUnavailableError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { LeaseWaitError, type TokenCoordinator } from './coordination.js';
import type { CredentialsReader, GrantType, TokenEndpoint, TokenSet } from './types.js';

export interface TokenKeeperOptions {
  endpoint: TokenEndpoint;
  readCredentials: CredentialsReader;
  settings: Pick<Config['token'], 'waitMs' | 'refreshMarginSeconds' | 'refreshFraction'>;
  clock: Clock;
  /** [0, 1); Math.random when absent. Drives renewal jitter and backoff jitter. */
  random?: () => number;
  logger: Logger;
  metrics: Pick<SidecarMetrics, 'tokenRequests' | 'tokenRequestDuration'> &
    Partial<Pick<SidecarMetrics, 'tokenAdopted'>>;
  /**
   * The shared token store's side (docs/token-store.md): wraps the one grant point.
   * Absent: this process keeps its own token.
   */
  coordinator?: TokenCoordinator;
  /** With tracing on: a span per token endpoint call (`oauth.token`). */
  traceGrant?: (grant: GrantType) => { end(outcome: 'success' | 'rejected' | 'error'): void };
}

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

/**
 * What `invalidate` decided about a token the upstream answered 401:
 * - `replay`: it is no longer the current token; a replay gets the current one (or waits for one).
 * - `renewing`: it was the current token; it is dropped and a renewal runs or is scheduled, so a
 *   replay waits for the new token (or gets `token_unavailable`).
 * - `keep`: the token is kept (a forced renewal ran less than 5 s ago and none is in flight, or the
 *   keeper is stopped); a replay would carry the same token, so the 401 goes to the client.
 */
export type InvalidateVerdict = 'replay' | 'renewing' | 'keep';

export interface HeldToken {
  accessToken: string;
  sentAt: number;
  expiresAt: number;
  lifetimeSeconds: number;
}

export interface Waiter {
  resolve(token: string): void;
  reject(error: Error): void;
  timer: LongTimer | undefined;
}

export type Outcome =
  | { ok: true; grant: GrantType; tokenSet: TokenSet; sentAt: number }
  | { ok: false; grant: GrantType; error: unknown };

export type AttemptReason = 'startup' | 'renewal' | 'retry' | 'demand' | 'forced' | 'credentials';

/** The last failure's inputs to the retry time (schedule.ts `retryTime`). */
export interface FailureRecord {
  /** The backoff step: consecutive failures since the last success or credentials change. */
  failures: number;
  random: number;
  retryAfterMs: number | undefined;
}

export function errorKind(error: unknown): KeeperErrorKind {
  if (error instanceof TokenEndpointError) return error.kind;
  if (error instanceof CredentialsReadError) return 'credentials';
  if (error instanceof LeaseWaitError) return 'lease';
  return 'internal';
}

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
