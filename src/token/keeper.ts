/**
 * The token keeper (docs/design.md "Token keeper"): obtains the access token with the
 * client-credentials grant, renews it ahead of expiry (refresh-token grant while a refresh token is
 * held), retries failures with backoff, and hands the current token to the proxy. The timing rules
 * live in schedule.ts; this file is the state machine around them.
 */
import { setLongTimeout, type Clock, type LongTimer } from '../clock.js';
import type { Config } from '../config/types.js';
import {
  CredentialsReadError,
  TokenEndpointError,
  TokenUnavailableError,
  errorText,
  isRejectedGrant,
} from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import {
  FORCED_RENEWAL_INTERVAL_MS,
  MIN_RENEWAL_DELAY_MS,
  RequestCeiling,
  renewalTime,
  retryTime,
  secondsUntil,
} from './schedule.js';
import type { SharedTokenSet } from '../fleet/token-sets.js';
import {
  LEASE_POLL_MS,
  LeaseWaitError,
  type HeldRef,
  type RefreshSource,
  type TokenCoordinator,
} from './shared.js';
import type {
  ClientCredentials,
  CredentialsReader,
  GrantRequest,
  GrantType,
  TokenEndpoint,
  TokenSet,
} from './types.js';

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

interface HeldToken {
  accessToken: string;
  sentAt: number;
  expiresAt: number;
  lifetimeSeconds: number;
}

interface Waiter {
  resolve(token: string): void;
  reject(error: Error): void;
  timer: LongTimer | undefined;
}

type Outcome =
  | { ok: true; grant: GrantType; tokenSet: TokenSet; sentAt: number }
  | { ok: false; grant: GrantType; error: unknown };

type AttemptReason = 'startup' | 'renewal' | 'retry' | 'demand' | 'forced' | 'credentials';

/** The last failure's inputs to the retry time (schedule.ts `retryTime`). */
interface FailureRecord {
  /** The backoff step: consecutive failures since the last success or credentials change. */
  failures: number;
  random: number;
  retryAfterMs: number | undefined;
}

/**
 * Keeps one access token fresh. Satisfies proxy/types.ts `AccessTokenSource` and telemetry's
 * `TokenGaugeSource` structurally (token/ may not import proxy/).
 */
export class TokenKeeper {
  private readonly endpoint: TokenEndpoint;
  private readonly readCredentials: CredentialsReader;
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
  /**
   * With a shared store, while a retry waits out its backoff: the next look at the store for a set
   * another process published (see {@link watchStore}).
   */
  private watchTimer: LongTimer | undefined;
  /** When the scheduled timer fires. */
  private nextAttemptAt: number | undefined;
  /** Backoff / Retry-After: no token request before this time (ms since the epoch). */
  private notBefore = 0;
  /** What set `notBefore`, so it can be pulled in when the token is dropped; none after a success. */
  private failure: FailureRecord | undefined;
  private consecutiveFailures = 0;
  /** `consecutiveFailures` at the last credentials change: the backoff starts over from there. */
  private failuresBeforeChange = 0;
  private lastError: KeeperStatus['lastError'] = null;
  private lastGrant: GrantType | undefined;
  private lastForcedAt: number | undefined;
  /** The token an upstream 401 invalidated, for the next grant's compare-and-delete in the store. */
  private rejectedToken: string | undefined;
  /** At most 10 token requests in any 10 s, for every path into a grant. */
  private readonly ceiling = new RequestCeiling();
  private readonly waiters = new Set<Waiter>();
  private readonly readyWaiters: { resolve(): void; reject(error: Error): void }[] = [];

  constructor(options: TokenKeeperOptions) {
    this.endpoint = options.endpoint;
    this.readCredentials = options.readCredentials;
    this.settings = options.settings;
    this.clock = options.clock;
    this.random = options.random ?? Math.random;
    this.log = options.logger;
    this.metrics = options.metrics;
    this.coordinator = options.coordinator;
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
    for (const waiter of this.waiters) {
      this.settleWaiter(waiter);
      waiter.reject(new TokenUnavailableError('the token keeper is shutting down', 1));
    }
    for (const waiter of this.readyWaiters.splice(0)) {
      waiter.reject(
        new TokenUnavailableError('the token keeper stopped before a token arrived', 1),
      );
    }
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
    return new Promise<string>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, timer: undefined };
      waiter.timer = setLongTimeout(
        this.clock,
        () => {
          this.waiters.delete(waiter);
          reject(this.unavailable());
        },
        this.settings.waitMs,
      );
      this.waiters.add(waiter);
    });
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
    if (this.failure !== undefined) {
      this.notBefore = Math.min(this.notBefore, retryTime(now, this.failure, undefined));
    }
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
    if (!this.started || this.stopped || this.consecutiveFailures === 0) return;
    this.failuresBeforeChange = this.consecutiveFailures;
    this.failure = undefined;
    this.notBefore = 0;
    this.attempt('credentials');
  }

  /** Resolves on the first successful grant; rejects if the keeper is stopped before that. */
  whenReady(): Promise<void> {
    if (this.lastGrant !== undefined) return Promise.resolve();
    if (this.stopped) {
      return Promise.reject(new TokenUnavailableError('the token keeper is stopped', 1));
    }
    return new Promise<void>((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  /** The one status snapshot (see {@link KeeperStatus}). */
  status(): KeeperStatus {
    const now = this.clock.now();
    const held = this.current;
    return {
      ready: this.validToken() !== undefined,
      lastGrant: this.lastGrant ?? null,
      tokenAgeSeconds: held === undefined ? null : Math.max(0, (now - held.sentAt) / 1_000),
      expiresInSeconds: held === undefined ? 0 : Math.max(0, (held.expiresAt - now) / 1_000),
      lifetimeSeconds: held?.lifetimeSeconds ?? null,
      nextRenewalAt: this.nextAttemptAt === undefined ? null : iso(this.nextAttemptAt),
      refreshTokenHeld: this.refreshToken !== undefined,
      lastError: this.lastError === null ? null : { ...this.lastError },
      consecutiveFailures: this.consecutiveFailures,
      requestInFlight: this.inflight !== undefined,
    };
  }

  private validToken(): string | undefined {
    const held = this.current;
    if (held === undefined || this.clock.now() >= held.expiresAt) return undefined;
    return held.accessToken;
  }

  /** No token request before this time: the backoff / `Retry-After`, and the rate ceiling. */
  private earliestAttemptAt(now: number): number {
    return Math.max(this.notBefore, this.ceiling.nextFreeAt(now));
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
    const progress: { grant: GrantType } = { grant: 'client_credentials' };
    let outcome: Outcome;
    let adopted: { tokenSet: SharedTokenSet; generation: number } | undefined;
    let sharedRefresh: { refreshToken: string | undefined } | undefined;
    const rejectedToken = this.rejectedToken;
    this.rejectedToken = undefined;
    try {
      if (this.coordinator === undefined) {
        outcome = await this.obtain(progress, { kind: 'local' });
      } else {
        const result = await this.coordinator.obtain(
          { held: this.heldRef(), rejectedToken },
          (source) => this.obtain(progress, source),
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

  /**
   * Refresh grant while a refresh token is held, else (or once it is rejected) client credentials.
   * `progress.grant` names the grant running, for a failure nobody anticipated.
   */
  private async obtain(progress: { grant: GrantType }, source: RefreshSource): Promise<Outcome> {
    // A store fallback can come back after stop(): no token request from a stopped keeper.
    if (this.stopped) {
      return { ok: false, grant: progress.grant, error: new TokenUnavailableError('stopped', 1) };
    }
    // The fleet's refresh token while this process holds the store's lease; its own otherwise.
    const refreshToken = source.kind === 'shared' ? source.refreshToken : this.refreshToken;
    if (refreshToken !== undefined) {
      progress.grant = 'refresh_token';
      const refreshed = await this.call({ grant: 'refresh_token', refreshToken });
      if (refreshed.ok || !isRejectedGrant(refreshed.error)) return refreshed;
      // The refresh token is dead (revoked, expired or already used): client credentials at once,
      // unless the rate ceiling forbids a second request now (then the retry uses them).
      if (this.refreshToken === refreshToken) this.refreshToken = undefined;
      const now = this.clock.now();
      if (this.stopped || this.ceiling.nextFreeAt(now) > now) return refreshed;
      this.logFailure(refreshed.grant, refreshed.error, 'falling back to client credentials');
    }
    progress.grant = 'client_credentials';
    let credentials: ClientCredentials;
    try {
      credentials = await this.readCredentials();
    } catch (error) {
      return { ok: false, grant: 'client_credentials', error: new CredentialsReadError(error) };
    }
    return this.call({ grant: 'client_credentials', credentials });
  }

  /** One token endpoint call, counted against the rate ceiling, with its metrics. Never rejects. */
  private async call(request: GrantRequest): Promise<Outcome> {
    const grant = request.grant;
    // expiresAt counts from the moment the request was sent, not from when the answer arrived.
    const sentAt = this.clock.now();
    this.ceiling.record(sentAt);
    let outcome: Outcome;
    try {
      const tokenSet = await this.endpoint.requestToken(request);
      outcome = { ok: true, grant, tokenSet, sentAt };
    } catch (error) {
      outcome = { ok: false, grant, error };
    }
    const result = outcome.ok ? 'success' : isRejectedGrant(outcome.error) ? 'rejected' : 'error';
    this.metrics.tokenRequests.inc({ grant, outcome: result });
    this.metrics.tokenRequestDuration.observe({ grant }, (this.clock.now() - sentAt) / 1_000);
    return outcome;
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
    this.consecutiveFailures = 0;
    this.failuresBeforeChange = 0;
    this.failure = undefined;
    this.notBefore = 0;
    const now = this.clock.now();
    const renewAt = Math.max(
      renewalTime(sentAt, lifetimeSeconds, this.settings, this.random()),
      now + MIN_RENEWAL_DELAY_MS,
    );
    this.schedule(renewAt, 'renewal');
    return renewAt;
  }

  /**
   * A token already past its expiresAt (expiresIn: 0, or a slow answer) is never handed out:
   * waiters keep waiting for the next one or their waitMs.
   */
  private wakeWaiters(): void {
    const valid = this.validToken();
    if (valid === undefined) return;
    for (const waiter of this.waiters) {
      this.settleWaiter(waiter);
      waiter.resolve(valid);
    }
    for (const waiter of this.readyWaiters.splice(0)) waiter.resolve();
  }

  /**
   * Any failure, including a rejected client-credentials grant (the secret may be rotated soon).
   * The retry waits for the backoff / `Retry-After`, but never longer than the recovery cap (8 s)
   * past the held token's expiry, or past now when none is valid: one timer covers both.
   */
  private onFailure({ grant, error }: Extract<Outcome, { ok: false }>): void {
    this.consecutiveFailures += 1;
    const now = this.clock.now();
    this.failure = {
      failures: this.consecutiveFailures - this.failuresBeforeChange,
      random: this.random(),
      retryAfterMs: error instanceof TokenEndpointError ? error.retryAfterMs : undefined,
    };
    this.notBefore = retryTime(now, this.failure, this.current?.expiresAt);
    const retryAt = this.earliestAttemptAt(now);
    this.schedule(retryAt, 'retry');
    this.lastError = { kind: errorKind(error), message: errorText(error), at: iso(now) };
    this.logFailure(grant, error, `retrying at ${iso(retryAt)}`);
    // Waiters keep waiting: the retry may land within their waitMs, or another process's token.
    this.watchStore();
  }

  /**
   * With a shared store, a process waiting out a backoff would otherwise serve 503 until its own
   * retry although another process has published a new token meanwhile (the lease holder's grant
   * failed, this one gave up waiting for it, and a third renewed). So while the retry waits and no
   * valid token is held, it looks at the store every {@link LEASE_POLL_MS} (one read, no lease) and
   * adopts a set it finds; while the held token is still valid, the first look is at its expiry.
   * Bounded: one read at a time, only between a failure and the next attempt; a store error ends
   * the watch until the next failure (the retry then decides, as without a store).
   */
  private watchStore(): void {
    this.clearWatch();
    const { coordinator, failure } = this;
    if (coordinator === undefined || failure === undefined) return;
    if (this.stopped || this.inflight !== undefined) return;
    const now = this.clock.now();
    const validUntil = this.current?.expiresAt ?? now;
    const delay = validUntil > now ? validUntil - now : LEASE_POLL_MS;
    this.watchTimer = setLongTimeout(
      this.clock,
      () => {
        this.watchTimer = undefined;
        void this.lookAtStore(coordinator, failure);
      },
      delay,
    );
  }

  private async lookAtStore(coordinator: TokenCoordinator, failure: FailureRecord): Promise<void> {
    let found: Awaited<ReturnType<TokenCoordinator['peek']>>;
    try {
      found = await coordinator.peek({ held: this.heldRef(), rejectedToken: this.rejectedToken });
    } catch (error) {
      this.log.debug(
        { event: 'store', error: errorText(error) },
        'store unreadable while waiting to retry; the retry decides',
      );
      return;
    }
    // Only if nothing happened meanwhile: no attempt started, no other outcome, not stopped.
    if (this.stopped || this.inflight !== undefined || this.failure !== failure) return;
    if (found === undefined) {
      this.watchStore();
      return;
    }
    this.clearTimer();
    this.nextAttemptAt = undefined;
    this.rejectedToken = undefined;
    this.onAdopted(found.tokenSet, found.generation);
  }

  /** The held token as the coordinator compares it with the store's (no refresh token). */
  private heldRef(): HeldRef | undefined {
    const held = this.current;
    return held === undefined
      ? undefined
      : { accessToken: held.accessToken, expiresAt: held.expiresAt };
  }

  private clearWatch(): void {
    this.watchTimer?.cancel();
    this.watchTimer = undefined;
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

  private settleWaiter(waiter: Waiter): void {
    waiter.timer?.cancel();
    this.waiters.delete(waiter);
  }

  private unavailable(): TokenUnavailableError {
    const now = this.clock.now();
    const nextAt = this.inflight === undefined ? this.nextAttemptAt : undefined;
    const retryAfter = nextAt === undefined ? 1 : secondsUntil(nextAt, now);
    const reason =
      this.lastError === null
        ? 'no token yet'
        : `last token endpoint error: ${this.lastError.kind}: ${this.lastError.message}`;
    return new TokenUnavailableError(
      `no valid access token within ${this.settings.waitMs} ms (${reason})`,
      retryAfter,
    );
  }

  private logFailure(grant: GrantType, error: unknown, next: string): void {
    const fields = {
      event: 'token',
      grant,
      outcome: isRejectedGrant(error) ? 'rejected' : 'error',
      errorKind: errorKind(error),
      error: errorText(error),
      status: error instanceof TokenEndpointError ? error.status : undefined,
      oauthError: error instanceof TokenEndpointError ? error.oauthError : undefined,
      consecutiveFailures: this.consecutiveFailures,
      tokenValid: this.validToken() !== undefined,
    };
    this.log.warn(fields, `token request failed; ${next}`);
  }
}

function errorKind(error: unknown): KeeperErrorKind {
  if (error instanceof TokenEndpointError) return error.kind;
  if (error instanceof CredentialsReadError) return 'credentials';
  if (error instanceof LeaseWaitError) return 'lease';
  return 'internal';
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
