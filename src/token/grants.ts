/**
 * One grant as the keeper runs it: the refresh-token grant while a refresh token is held, else
 * (or once it is rejected) client credentials; each call counted against the rate ceiling.
 */
import type { Clock } from '../clock.js';
import { CredentialsReadError, TokenUnavailableError, isRejectedGrant } from '../errors.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import type { HeldTokens } from './held-token.js';
import type { RequestCeiling } from './schedule.js';
import type { GrantOutcome, HeldRef, RefreshSource, TokenCoordinator } from './coordination.js';
import type { SharedTokenSet } from '../fleet/token-sets.js';
import type {
  ClientCredentials,
  CredentialsReader,
  GrantRequest,
  GrantType,
  TokenEndpoint,
} from './types.js';

/** One grant's result: the token set with the time its request was sent, or the error. */
export type Outcome = GrantOutcome;

/** With tracing on: a span per token endpoint call (`oauth.token`). */
export type GrantTracer = (grant: GrantType) => {
  end(outcome: 'success' | 'rejected' | 'error'): void;
};

/** The counters each token endpoint call feeds. */
export type GrantMetrics = Pick<SidecarMetrics, 'tokenRequests' | 'tokenRequestDuration'>;

export interface GrantsDeps {
  endpoint: TokenEndpoint;
  readCredentials: CredentialsReader;
  metrics: GrantMetrics;
  traceGrant: GrantTracer | undefined;
  clock: Clock;
  ceiling: RequestCeiling;
  isStopped(): boolean;
  /** The process's own refresh token, and forgetting it once rejected. */
  held: Pick<HeldTokens, 'refreshToken' | 'dropRefresh'>;
  logFailure(grant: GrantType, error: unknown, next: string): void;
}

export interface GrantResult {
  outcome: Outcome;
  /** A set another process obtained, taken from the store instead of a grant. */
  adopted?: { tokenSet: SharedTokenSet; generation: number };
  /** Under the lease: the fleet's newest refresh token, as the coordinator resolved it. */
  sharedRefresh?: { refreshToken: string | undefined };
}

export class Grants {
  constructor(private readonly deps: GrantsDeps) {}

  /**
   * Refresh grant while a refresh token is held, else (or once it is rejected) client credentials.
   * `progress.grant` names the grant running, for a failure nobody anticipated.
   */
  async obtain(progress: { grant: GrantType }, source: RefreshSource): Promise<Outcome> {
    // A store fallback can come back after stop(): no token request from a stopped keeper.
    if (this.deps.isStopped()) {
      return { ok: false, grant: progress.grant, error: new TokenUnavailableError('stopped', 1) };
    }
    // The fleet's refresh token while this process holds the store's lease; its own otherwise.
    const refreshToken =
      source.kind === 'shared' ? source.refreshToken : this.deps.held.refreshToken;
    if (refreshToken !== undefined) {
      progress.grant = 'refresh_token';
      const refreshed = await this.#call({ grant: 'refresh_token', refreshToken });
      if (refreshed.ok || !isRejectedGrant(refreshed.error)) return refreshed;
      // The refresh token is dead (revoked, expired or already used): client credentials at once,
      // unless the rate ceiling forbids a second request now (then the retry uses them).
      this.deps.held.dropRefresh(refreshToken);
      const now = this.deps.clock.now();
      if (this.deps.isStopped() || this.deps.ceiling.nextFreeAt(now) > now) return refreshed;
      this.deps.logFailure(refreshed.grant, refreshed.error, 'falling back to client credentials');
    }
    progress.grant = 'client_credentials';
    let credentials: ClientCredentials;
    try {
      credentials = await this.deps.readCredentials();
    } catch (error) {
      return { ok: false, grant: 'client_credentials', error: new CredentialsReadError(error) };
    }
    return this.#call({ grant: 'client_credentials', credentials });
  }

  /** One token endpoint call, counted against the rate ceiling, with its metrics. Never rejects. */
  async #call(request: GrantRequest): Promise<Outcome> {
    const grant = request.grant;
    // expiresAt counts from the moment the request was sent, not from when the answer arrived.
    const sentAt = this.deps.clock.now();
    this.deps.ceiling.record(sentAt);
    const span = this.deps.traceGrant?.(grant);
    let outcome: Outcome;
    try {
      const tokenSet = await this.deps.endpoint.requestToken(request);
      outcome = { ok: true, grant, tokenSet, sentAt };
    } catch (error) {
      outcome = { ok: false, grant, error };
    }
    const result = outcome.ok ? 'success' : isRejectedGrant(outcome.error) ? 'rejected' : 'error';
    this.deps.metrics.tokenRequests.inc({ grant, outcome: result });
    span?.end(result);
    this.deps.metrics.tokenRequestDuration.observe(
      { grant },
      (this.deps.clock.now() - sentAt) / 1_000,
    );
    return outcome;
  }

  /**
   * One grant, through the coordinator's lease when there is a store. Never rejects: an adopted
   * set, a lost lease or a failure each come back as data.
   */
  async run(
    coordinator: TokenCoordinator | undefined,
    held: HeldRef | undefined,
    rejectedToken: string | undefined,
  ): Promise<GrantResult> {
    const progress: { grant: GrantType } = { grant: 'client_credentials' };
    let outcome: Outcome;
    let adopted: { tokenSet: SharedTokenSet; generation: number } | undefined;
    let sharedRefresh: { refreshToken: string | undefined } | undefined;
    try {
      if (coordinator === undefined) {
        outcome = await this.obtain(progress, { kind: 'local' });
      } else {
        const result = await coordinator.obtain({ held, rejectedToken }, (source) =>
          this.obtain(progress, source),
        );
        if (result.kind === 'adopted') {
          adopted = result;
          outcome = { ok: false, grant: progress.grant, error: undefined };
        } else if (result.kind === 'lease-lost') {
          outcome = { ok: false, grant: progress.grant, error: result.error };
        } else {
          outcome = result.outcome;
          if (result.shared) sharedRefresh = { refreshToken: result.refreshToken };
        }
      }
    } catch (error) {
      // obtain() does not throw; if it ever does, report the grant that was running.
      outcome = { ok: false, grant: progress.grant, error };
    }
    return { outcome, adopted, sharedRefresh };
  }
}
