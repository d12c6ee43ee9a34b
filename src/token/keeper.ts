/**
 * The token keeper (docs/design.md "Token keeper"): obtains the access token with the
 * client-credentials grant, renews it ahead of expiry (refresh-token grant while a refresh token is
 * held), retries failures with backoff, and hands the current token to the proxy. The timing rules
 * live in schedule.ts; this file is the state machine around them.
 */
import { setLongTimeout, type Clock, type LongTimer } from '../clock.js';
import { TokenUnavailableError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import {
  FORCED_RENEWAL_INTERVAL_MS,
  MIN_RENEWAL_DELAY_MS,
  RequestCeiling,
  renewalTime,
  secondsUntil,
} from './schedule.js';
import type { SharedTokenSet } from '../fleet/token-sets.js';
import { StoreWatch } from './store-watch.js';
import { TokenWaiters } from './waiters.js';
import { Grants } from './grants.js';
import { Failures } from './failures.js';
import {
  failureFields,
  iso,
  statusOf,
  unavailableError,
  type AttemptReason,
  type HeldToken,
  type InvalidateVerdict,
  type KeeperStatus,
  type Outcome,
  type TokenKeeperOptions,
} from './keeper-types.js';
import type { HeldRef, TokenCoordinator } from './shared.js';
import type { GrantType } from './types.js';

export type {
  InvalidateVerdict,
  KeeperErrorKind,
  KeeperStatus,
  TokenKeeperOptions,
} from './keeper-types.js';

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
  private current: HeldToken | undefined;
  private refreshToken: string | undefined;
  private inflight: Promise<void> | undefined;
  private timer: LongTimer | undefined;
  /** With a shared store: adopts a set published while a retry waits (store-watch.ts). */
  private readonly storeWatch: StoreWatch | undefined;
  /** When the scheduled timer fires. */
  private nextAttemptAt: number | undefined;
  private readonly failures: Failures;
  private lastGrant: GrantType | undefined;
  private lastForcedAt: number | undefined;
  /** The token an upstream 401 invalidated, for the next grant's compare-and-delete in the store. */
  private rejectedToken: string | undefined;
  /** At most 10 token requests in any 10 s, for every path into a grant. */
  private readonly ceiling = new RequestCeiling();
  private readonly waiters: TokenWaiters;
  private readonly grants: Grants;

  constructor(options: TokenKeeperOptions) {
    this.settings = options.settings;
    this.clock = options.clock;
    this.random = options.random ?? Math.random;
    this.failures = new Failures(this.random);
    this.log = options.logger;
    this.metrics = options.metrics;
    this.coordinator = options.coordinator;
    this.waiters = new TokenWaiters(this.clock);
    this.grants = new Grants({
      endpoint: options.endpoint,
      readCredentials: options.readCredentials,
      metrics: this.metrics,
      traceGrant: options.traceGrant,
      clock: this.clock,
      ceiling: this.ceiling,
      isStopped: () => this.stopped,
      refreshToken: () => this.refreshToken,
      dropRefreshToken: (token) => {
        if (this.refreshToken === token) this.refreshToken = undefined;
      },
      logFailure: (grant, error, next) => this.logFailure(grant, error, next),
    });
    const coordinator = options.coordinator;
    this.storeWatch =
      coordinator === undefined
        ? undefined
        : new StoreWatch({
            coordinator,
            clock: this.clock,
            log: this.log,
            held: () => this.heldRef(),
            rejectedToken: () => this.rejectedToken,
            stillWaiting: (failure) =>
              !this.stopped && this.inflight === undefined && this.failures.last === failure,
            adopt: (tokenSet, generation) => {
              this.clearTimer();
              this.nextAttemptAt = undefined;
              this.rejectedToken = undefined;
              this.onAdopted(tokenSet, generation);
            },
          });
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
    this.clearTimer();
    this.clearWatch();
    this.nextAttemptAt = undefined;
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
    if (this.current?.accessToken !== token) return 'replay';
    const now = this.clock.now();
    if (this.lastForcedAt !== undefined && now - this.lastForcedAt < FORCED_RENEWAL_INTERVAL_MS) {
      this.log.warn(
        { event: 'token', reason: 'forced', rateLimited: true },
        'upstream rejected the newest access token again within 5 s of a forced renewal; keeping it',
      );
      return this.inflight === undefined ? 'keep' : 'renewing';
    }
    this.lastForcedAt = now;
    this.current = undefined;
    this.rejectedToken = token;
    // Not serving from now on: a pending backoff / Retry-After wait ends within the recovery cap.
    this.failures.tokenDropped(now);
    const startAt = this.inflight === undefined ? this.earliestAttemptAt(now) : now;
    let what = 'a token request is already in flight';
    if (this.inflight === undefined) {
      what = startAt > now ? 'dropped it, the next attempt is after the backoff' : 'renewing';
    }
    this.log.info(
      {
        event: 'token',
        reason: 'forced',
        ...(startAt > now && { nextAttemptAt: iso(startAt) }),
      },
      `upstream rejected the access token; ${what}`,
    );
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
    if (this.lastGrant !== undefined) return Promise.resolve();
    if (this.stopped) {
      return Promise.reject(new TokenUnavailableError('the token keeper is stopped', 1));
    }
    return this.waiters.whenReady();
  }

  /** The one status snapshot (see {@link KeeperStatus}). */
  status(): KeeperStatus {
    return statusOf(this.clock.now(), this.current, {
      ready: this.validToken() !== undefined,
      lastGrant: this.lastGrant ?? null,
      nextRenewalAt: this.nextAttemptAt === undefined ? null : iso(this.nextAttemptAt),
      refreshTokenHeld: this.refreshToken !== undefined,
      lastError: this.failures.lastError === null ? null : { ...this.failures.lastError },
      consecutiveFailures: this.failures.consecutive,
      requestInFlight: this.inflight !== undefined,
    });
  }

  private validToken(): string | undefined {
    const held = this.current;
    if (held === undefined || this.clock.now() >= held.expiresAt) return undefined;
    return held.accessToken;
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
      if (this.timer === undefined || this.nextAttemptAt !== earliest) {
        this.schedule(earliest, reason);
      }
      return;
    }
    this.clearTimer();
    this.clearWatch();
    this.nextAttemptAt = undefined;
    this.log.debug({ event: 'token', reason }, 'token request starting');
    this.inflight = this.runGrant();
  }

  /**
   * Runs one grant and applies its result: the one place the keeper's token set changes (a shared
   * store's lease and compare-and-set wrap this). Never rejects.
   */
  private async runGrant(): Promise<void> {
    const rejectedToken = this.rejectedToken;
    this.rejectedToken = undefined;
    const { outcome, adopted, sharedRefresh } = await this.grants.run(
      this.coordinator,
      this.heldRef(),
      rejectedToken,
    );
    this.inflight = undefined;
    if (this.stopped) return;
    try {
      if (adopted !== undefined) this.onAdopted(adopted.tokenSet, adopted.generation);
      else if (outcome.ok) {
        this.onSuccess(outcome);
        // Under the lease the newest refresh token is the fleet's, resolved by the coordinator.
        if (sharedRefresh !== undefined) this.refreshToken = sharedRefresh.refreshToken;
      } else this.onFailure(outcome);
    } catch (error) {
      // Applying a result does not throw either; if it does, keep the keeper alive and retrying.
      if (!this.stopped) this.onFailure({ ok: false, grant: outcome.grant, error });
    }
  }

  private onSuccess({ grant, tokenSet, sentAt }: Extract<Outcome, { ok: true }>): void {
    const lifetimeSeconds = tokenSet.expiresInSeconds;
    // string: replace (refresh tokens may be single-use, so only the newest is kept);
    // null: the API's "about to expire" signal, drop it; absent: keep the held one (RFC 6749 §6).
    if (typeof tokenSet.refreshToken === 'string') this.refreshToken = tokenSet.refreshToken;
    else if (tokenSet.refreshToken === null) this.refreshToken = undefined;
    const renewAt = this.hold(tokenSet.accessToken, sentAt, lifetimeSeconds, grant);

    if (tokenSet.lifetimeDefaulted) {
      this.log.warn(
        { event: 'token', grant, lifetimeSeconds },
        `token endpoint answer had no expiresIn; assuming ${lifetimeSeconds} s`,
      );
    }
    this.log.info(
      {
        event: 'token',
        grant,
        outcome: 'success',
        lifetimeSeconds,
        refreshTokenHeld: this.refreshToken !== undefined,
        nextRenewalAt: iso(renewAt),
      },
      'access token obtained',
    );

    this.wakeWaiters();
  }

  /**
   * A token set another process obtained, taken from the shared store (no grant). Its renewal is
   * scheduled from the shared entry (jitter included), and its refresh token stays in the store:
   * only a lease holder uses it.
   */
  private onAdopted(set: SharedTokenSet, generation: number): void {
    this.refreshToken = undefined;
    const renewAt = this.hold(set.accessToken, set.sentAt, set.lifetimeSeconds, set.grant);
    this.metrics.tokenAdopted?.inc();
    this.log.info(
      {
        event: 'token',
        grant: set.grant,
        outcome: 'adopted',
        generation,
        lifetimeSeconds: set.lifetimeSeconds,
        nextRenewalAt: iso(renewAt),
      },
      'access token adopted from the shared store',
    );
    this.wakeWaiters();
  }

  /** Make `accessToken` the current token and schedule its renewal; returns the renewal time. */
  private hold(
    accessToken: string,
    sentAt: number,
    lifetimeSeconds: number,
    grant: GrantType,
  ): number {
    this.current = {
      accessToken,
      sentAt,
      expiresAt: sentAt + lifetimeSeconds * 1_000,
      lifetimeSeconds,
    };
    this.lastGrant = grant;
    this.clearWatch();
    this.failures.succeeded();
    const now = this.clock.now();
    const renewAt = Math.max(
      renewalTime(sentAt, lifetimeSeconds, this.settings, this.random()),
      now + MIN_RENEWAL_DELAY_MS,
    );
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
   * The retry waits for the backoff / `Retry-After`, but never longer than the recovery cap (8 s)
   * past the held token's expiry, or past now when none is valid: one timer covers both.
   */
  private onFailure({ grant, error }: Extract<Outcome, { ok: false }>): void {
    const now = this.clock.now();
    this.failures.record(error, now, this.current?.expiresAt);
    const retryAt = this.earliestAttemptAt(now);
    this.schedule(retryAt, 'retry');
    this.logFailure(grant, error, `retrying at ${iso(retryAt)}`);
    // Waiters keep waiting: the retry may land within their waitMs, or another process's token.
    this.watchStore();
  }

  /** Between a failure and the retry, a set another process published is adopted at once. */
  private watchStore(): void {
    this.clearWatch();
    const failure = this.failures.last;
    if (this.storeWatch === undefined || failure === undefined) return;
    if (this.stopped || this.inflight !== undefined) return;
    this.storeWatch.start(failure);
  }

  /** The held token as the coordinator compares it with the store's (no refresh token). */
  private heldRef(): HeldRef | undefined {
    const held = this.current;
    return held === undefined
      ? undefined
      : { accessToken: held.accessToken, expiresAt: held.expiresAt };
  }

  private clearWatch(): void {
    this.storeWatch?.clear();
  }

  private schedule(at: number, reason: AttemptReason): void {
    this.clearTimer();
    this.nextAttemptAt = at;
    this.timer = setLongTimeout(
      this.clock,
      () => {
        this.timer = undefined;
        this.attempt(reason);
      },
      at - this.clock.now(),
    );
  }

  private clearTimer(): void {
    this.timer?.cancel();
    this.timer = undefined;
  }

  private unavailable(): TokenUnavailableError {
    const nextAt = this.inflight === undefined ? this.nextAttemptAt : undefined;
    const retryAfter = nextAt === undefined ? 1 : secondsUntil(nextAt, this.clock.now());
    return unavailableError(this.settings.waitMs, this.failures.lastError, retryAfter);
  }

  private logFailure(grant: GrantType, error: unknown, next: string): void {
    const valid = this.validToken() !== undefined;
    this.log.warn(
      failureFields(grant, error, this.failures.consecutive, valid),
      `token request failed; ${next}`,
    );
  }
}
