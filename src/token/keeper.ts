/**
 * The token keeper (docs/design.md "Token keeper"): obtains the access token with the
 * client-credentials grant, renews it ahead of expiry (refresh-token grant while a refresh token is
 * held), retries failures with backoff, and hands the current token to the proxy. This file is the
 * state machine; its parts: the timing rules (schedule.ts), the pending attempt (attempt-timer.ts),
 * upstream 401s (invalidation.ts), the held tokens (held-token.ts), failures (failures.ts), one
 * grant (grants.ts), the shared store's watch (store-watch.ts), waiting callers (waiters.ts), the
 * status it reports (keeper-status.ts) and its log lines (keeper-log.ts).
 */
import type { Clock } from '../clock.js';
import type { Config } from '../config/types.js';
import { TokenUnavailableError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { RequestCeiling, nextRenewalAt, secondsUntil } from './schedule.js';
import type { SharedTokenSet } from '../fleet/token-sets.js';
import { StoreWatch } from './store-watch.js';
import { TokenWaiters } from './waiters.js';
import { Grants, type GrantMetrics, type GrantTracer, type Outcome } from './grants.js';
import { Failures } from './failures.js';
import { AttemptTimer } from './attempt-timer.js';
import { HeldTokens } from './held-token.js';
import { Invalidation } from './invalidation.js';
import { logAdopted, logFailure, logObtained } from './keeper-log.js';
import { iso, statusOf, unavailableError, type KeeperStatus } from './keeper-status.js';
import type { TokenCoordinator } from './coordination.js';
import type { CredentialsReader, GrantType, TokenEndpoint } from './types.js';

export type { KeeperErrorKind, KeeperStatus } from './keeper-status.js';

export interface TokenKeeperOptions {
  endpoint: TokenEndpoint;
  readCredentials: CredentialsReader;
  settings: Pick<Config['token'], 'waitMs' | 'refreshMarginSeconds' | 'refreshFraction'> &
    Partial<Pick<Config['token'], 'recoveryBackoffCapMs'>>;
  clock: Clock;
  /** [0, 1); Math.random when absent. Drives renewal jitter and backoff jitter. */
  random?: () => number;
  logger: Logger;
  metrics: GrantMetrics & Partial<Pick<SidecarMetrics, 'tokenAdopted'>>;
  /**
   * The shared token store's side (docs/token-store.md): wraps the one grant point.
   * Absent: this process keeps its own token.
   */
  coordinator?: TokenCoordinator;
  /** With tracing on: a span per token endpoint call (`oauth.token`). */
  traceGrant?: GrantTracer;
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

/** Why a token attempt starts (logged at debug). */
type AttemptReason = 'startup' | 'renewal' | 'retry' | 'demand' | 'forced' | 'credentials';

/**
 * Keeps one access token fresh. Satisfies proxy/types.ts `AccessTokenSource` and telemetry's
 * `TokenGaugeSource` structurally (token/ may not import proxy/).
 */
export class TokenKeeper {
  private readonly settings: TokenKeeperOptions['settings'];
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly log: Logger;
  private readonly metrics: TokenKeeperOptions['metrics'];
  private readonly coordinator: TokenCoordinator | undefined;

  private started = false;
  private stopped = false;
  private readonly held = new HeldTokens();
  private inflight: Promise<void> | undefined;
  /** The scheduled renewal or retry. */
  private readonly next: AttemptTimer;
  /** With a shared store: adopts a set published while a retry waits (store-watch.ts). */
  private readonly storeWatch: StoreWatch | undefined;
  private readonly failures: Failures;
  private readonly invalidation: Invalidation;
  /** At most 10 token requests in any 10 s, for every path into a grant. */
  private readonly ceiling = new RequestCeiling();
  private readonly waiters: TokenWaiters;
  private readonly grants: Grants;

  constructor(options: TokenKeeperOptions) {
    this.settings = options.settings;
    this.clock = options.clock;
    this.random = options.random ?? Math.random;
    this.failures = new Failures(this.random, options.settings.recoveryBackoffCapMs);
    this.log = options.logger;
    this.metrics = options.metrics;
    this.coordinator = options.coordinator;
    this.next = new AttemptTimer(this.clock);
    this.invalidation = new Invalidation(this.log);
    this.waiters = new TokenWaiters(this.clock);
    this.grants = new Grants({
      endpoint: options.endpoint,
      readCredentials: options.readCredentials,
      metrics: this.metrics,
      traceGrant: options.traceGrant,
      clock: this.clock,
      ceiling: this.ceiling,
      isStopped: () => this.stopped,
      held: this.held,
      logFailure: (grant, error, next) => this.logFailure(grant, error, next),
    });
    this.storeWatch = this.watchOf(options.coordinator);
  }

  /** Starts the start-up client-credentials grant at once. Idempotent. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.attempt('startup');
  }

  /** Clears timers; pending callers are rejected. An in-flight request is left to finish unused. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.next.cancel();
    this.storeWatch?.clear();
    this.waiters.refuse(
      new TokenUnavailableError('the token keeper is shutting down', 1),
      new TokenUnavailableError('the token keeper stopped before a token arrived', 1),
    );
  }

  /**
   * The valid access token held now, or undefined (none held, expired, or the keeper stopped).
   * Synchronous: the proxy's path for the common case costs no promise (docs/benchmarks.md).
   * Never starts a token request; `getAccessToken()` does that.
   */
  currentToken(): string | undefined {
    return this.stopped ? undefined : this.validToken();
  }

  /**
   * A valid access token at once if one is held; otherwise waits up to `waitMs` (triggering a
   * token request unless one is in flight or backoff forbids it), then rejects with
   * TokenUnavailableError carrying the seconds until the next scheduled attempt.
   */
  getAccessToken(): Promise<string> {
    if (this.stopped) {
      return Promise.reject(new TokenUnavailableError('the token keeper is shutting down', 1));
    }
    const valid = this.validToken();
    if (valid !== undefined) return Promise.resolve(valid);
    // attempt() itself defers to the backoff and the rate ceiling.
    if (this.started) this.attempt('demand');
    return this.waiters.wait(this.settings.waitMs, () => this.unavailable());
  }

  /**
   * The upstream answered 401 to `token`. When it is the current token it is dropped and a renewal
   * starts (single flight, at most one forced renewal per 5 s, never against backoff or the rate
   * ceiling). Within 5 s of the previous forced renewal the newest token is kept: hammering the
   * endpoint will not make the upstream accept it sooner. See {@link InvalidateVerdict}.
   */
  invalidate(token: string): InvalidateVerdict {
    if (this.stopped) return 'keep';
    if (this.held.current?.accessToken !== token) return 'replay';
    const now = this.clock.now();
    if (!this.invalidation.force(token, now)) {
      return this.inflight === undefined ? 'keep' : 'renewing';
    }
    this.held.current = undefined;
    // Not serving from now on: a pending backoff / Retry-After wait ends within the recovery cap.
    this.failures.tokenDropped(now);
    const inFlight = this.inflight !== undefined;
    this.invalidation.logForced(now, inFlight ? now : this.earliestAttemptAt(now), inFlight);
    this.attempt('forced');
    return 'renewing';
  }

  /**
   * The client credentials changed (the credentials reader's `onChange`, wired in main.ts). A
   * failure with the old ones says nothing about the new ones: after a failure the backoff and any
   * `Retry-After` wait are dropped, the backoff starts over at its first step, and an attempt
   * starts at once, rate ceiling permitting (a request in flight already read the new ones).
   */
  credentialsChanged(): void {
    if (!this.started || this.stopped || !this.failures.credentialsChanged()) return;
    this.attempt('credentials');
  }

  /** Resolves on the first successful grant; rejects if the keeper is stopped before that. */
  whenReady(): Promise<void> {
    if (this.held.lastGrant !== undefined) return Promise.resolve();
    if (this.stopped) {
      return Promise.reject(new TokenUnavailableError('the token keeper is stopped', 1));
    }
    return this.waiters.whenReady();
  }

  /** The one status snapshot (see {@link KeeperStatus}). */
  status(): KeeperStatus {
    const nextAt = this.next.at;
    return statusOf(this.clock.now(), this.held, {
      nextRenewalAt: nextAt === undefined ? null : iso(nextAt),
      lastError: this.failures.lastError === null ? null : { ...this.failures.lastError },
      consecutiveFailures: this.failures.consecutive,
      requestInFlight: this.inflight !== undefined,
    });
  }

  private watchOf(coordinator: TokenCoordinator | undefined): StoreWatch | undefined {
    if (coordinator === undefined) return undefined;
    return new StoreWatch({
      coordinator,
      clock: this.clock,
      log: this.log,
      held: () => this.held.ref(),
      rejectedToken: () => this.invalidation.rejected,
      stillWaiting: (failure) =>
        !this.stopped && this.inflight === undefined && this.failures.last === failure,
      adopt: (tokenSet, generation) => {
        this.next.cancel();
        this.invalidation.clear();
        this.onAdopted(tokenSet, generation);
      },
    });
  }

  private validToken(): string | undefined {
    return this.held.valid(this.clock.now());
  }

  /** No token request before this time: the backoff / `Retry-After`, and the rate ceiling. */
  private earliestAttemptAt(now: number): number {
    return Math.max(this.failures.notBefore, this.ceiling.nextFreeAt(now));
  }

  /**
   * Every path into a grant (start-up, schedule, waiting callers, forced renewal, retry) comes
   * here: single flight, and nothing before {@link earliestAttemptAt}; a request that may not
   * start now is scheduled for when it may.
   */
  private attempt(reason: AttemptReason): void {
    if (this.inflight !== undefined || this.stopped) return;
    const now = this.clock.now();
    const earliest = this.earliestAttemptAt(now);
    if (earliest > now) {
      // Re-arm when no timer is pending: a timer may fire a millisecond before the wall clock
      // says it is due (libuv counts from its cached loop time), and must not end the schedule.
      if (!this.next.armedFor(earliest)) this.schedule(earliest, reason);
      return;
    }
    this.next.cancel();
    this.storeWatch?.clear();
    this.log.debug({ event: 'token', reason }, 'token request starting');
    this.inflight = this.runGrant();
  }

  /**
   * Runs one grant and applies its result: the one place the keeper's token set changes (a shared
   * store's lease and compare-and-set wrap this). Never rejects.
   */
  private async runGrant(): Promise<void> {
    const rejectedToken = this.invalidation.take();
    const { outcome, adopted, sharedRefresh } = await this.grants.run(
      this.coordinator,
      this.held.ref(),
      rejectedToken,
    );
    this.inflight = undefined;
    if (this.stopped) return;
    try {
      if (adopted !== undefined) this.onAdopted(adopted.tokenSet, adopted.generation);
      else if (outcome.ok) {
        this.onSuccess(outcome);
        // Under the lease the newest refresh token is the fleet's, resolved by the coordinator.
        if (sharedRefresh !== undefined) this.held.refreshToken = sharedRefresh.refreshToken;
      } else this.onFailure(outcome);
    } catch (error) {
      // Applying a result does not throw either; if it does, keep the keeper alive and retrying.
      if (!this.stopped) this.onFailure({ ok: false, grant: outcome.grant, error });
    }
  }

  private onSuccess({ grant, tokenSet, sentAt }: Extract<Outcome, { ok: true }>): void {
    this.held.received(tokenSet.refreshToken);
    const renewAt = this.hold(tokenSet.accessToken, sentAt, tokenSet.expiresInSeconds, grant);
    const refreshTokenHeld = this.held.refreshToken !== undefined;
    logObtained(this.log, grant, tokenSet, { refreshTokenHeld, renewAt });
    this.wakeWaiters();
  }

  /**
   * A token set another process obtained, taken from the shared store (no grant). Its renewal is
   * scheduled from the shared entry (jitter included), and its refresh token stays in the store:
   * only a lease holder uses it.
   */
  private onAdopted(set: SharedTokenSet, generation: number): void {
    this.held.refreshToken = undefined;
    const renewAt = this.hold(set.accessToken, set.sentAt, set.lifetimeSeconds, set.grant);
    this.metrics.tokenAdopted?.inc();
    logAdopted(this.log, set, generation, renewAt);
    this.wakeWaiters();
  }

  /** Make `accessToken` the current token and schedule its renewal; returns the renewal time. */
  private hold(
    accessToken: string,
    sentAt: number,
    lifetimeSeconds: number,
    grant: GrantType,
  ): number {
    this.held.hold(accessToken, sentAt, lifetimeSeconds, grant);
    this.storeWatch?.clear();
    this.failures.succeeded();
    const token = { sentAt, lifetimeSeconds };
    const renewAt = nextRenewalAt(this.clock.now(), token, this.settings, this.random());
    this.schedule(renewAt, 'renewal');
    return renewAt;
  }

  /** A token already expired (expiresIn: 0, a slow answer) is never handed out: waiters wait on. */
  private wakeWaiters(): void {
    const valid = this.validToken();
    if (valid === undefined) return;
    this.waiters.hand(valid);
  }

  /**
   * Any failure, including a rejected client-credentials grant (the secret may be rotated soon).
   * The retry waits for the backoff / `Retry-After`, but never longer than the recovery cap
   * (`token.recoveryBackoffCapMs`, 8 s by default) past the held token's expiry, or past now when
   * none is valid: one timer covers both.
   */
  private onFailure({ grant, error }: Extract<Outcome, { ok: false }>): void {
    const now = this.clock.now();
    this.failures.record(error, now, this.held.current?.expiresAt);
    const retryAt = this.earliestAttemptAt(now);
    this.schedule(retryAt, 'retry');
    this.logFailure(grant, error, `retrying at ${iso(retryAt)}`);
    // Waiters keep waiting: the retry may land within their waitMs, or another process's token.
    this.watchStore();
  }

  /** Between a failure and the retry, a set another process published is adopted at once. */
  private watchStore(): void {
    this.storeWatch?.clear();
    const failure = this.failures.last;
    if (this.storeWatch === undefined || failure === undefined) return;
    if (this.stopped || this.inflight !== undefined) return;
    this.storeWatch.start(failure);
  }

  private schedule(at: number, reason: AttemptReason): void {
    this.next.arm(at, () => this.attempt(reason));
  }

  private unavailable(): TokenUnavailableError {
    const nextAt = this.inflight === undefined ? this.next.at : undefined;
    const retryAfter = nextAt === undefined ? 1 : secondsUntil(nextAt, this.clock.now());
    return unavailableError(this.settings.waitMs, this.failures.lastError, retryAfter);
  }

  private logFailure(grant: GrantType, error: unknown, next: string): void {
    const tokenValid = this.validToken() !== undefined;
    const state = { consecutiveFailures: this.failures.consecutive, tokenValid };
    logFailure(this.log, grant, error, state, next);
  }
}
