/**
 * The token keeper (docs/design.md "Token keeper"): obtains the access token with the
 * client-credentials grant, renews it ahead of expiry (refresh-token grant while a refresh token is
 * held), retries failures with backoff, and hands the current token to the proxy. The timing rules
 * live in schedule.ts; this file is the state machine around them.
 */
import type { Clock, TimerHandle } from '../clock.js';
import { credentialsFingerprint } from '../config/credentials.js';
import type { Config } from '../config/types.js';
import { TokenEndpointError, TokenUnavailableError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import {
  FORCED_RENEWAL_INTERVAL_MS,
  MIN_RENEWAL_DELAY_MS,
  backoffDelayMs,
  renewalTime,
  secondsUntil,
} from './schedule.js';
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
  metrics: Pick<SidecarMetrics, 'tokenRequests' | 'tokenRequestDuration'>;
}

/** What went wrong last: a token endpoint error kind, or the credentials could not be read. */
export type KeeperErrorKind = TokenEndpointError['kind'] | 'credentials' | 'internal';

/** JSON-safe keeper state for `/status`. Never holds a token or a secret. */
export interface KeeperStatus {
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

/** The most recent successful grant, for the `check` command. */
export interface LastResult {
  grant: GrantType;
  expiresInSeconds: number;
  refreshTokenReceived: boolean;
}

interface HeldToken {
  accessToken: string;
  sentAt: number;
  expiresAt: number;
  lifetimeSeconds: number;
}

interface Waiter {
  resolve(token: string): void;
  reject(error: Error): void;
  timer: TimerHandle | undefined;
}

type Outcome =
  | { ok: true; grant: GrantType; tokenSet: TokenSet; sentAt: number }
  | { ok: false; grant: GrantType; error: unknown };

type AttemptReason = 'startup' | 'renewal' | 'retry' | 'demand' | 'forced';

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

  private started = false;
  private stopped = false;
  private current: HeldToken | undefined;
  private refreshToken: string | undefined;
  private inflight: Promise<void> | undefined;
  private timer: TimerHandle | undefined;
  /** When the scheduled timer fires. */
  private nextAttemptAt: number | undefined;
  /** Backoff / Retry-After: no token request before this time (ms since the epoch). */
  private notBefore = 0;
  private consecutiveFailures = 0;
  private lastError: KeeperStatus['lastError'] = null;
  private latest: LastResult | undefined;
  private lastForcedAt: number | undefined;
  private credentialsFingerprint: string | undefined;
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
    if (this.started && this.inflight === undefined && this.clock.now() >= this.notBefore) {
      this.attempt('demand');
    }
    return new Promise<string>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, timer: undefined };
      waiter.timer = this.clock.setTimeout(() => {
        this.waiters.delete(waiter);
        reject(this.unavailable());
      }, this.settings.waitMs);
      unref(waiter.timer);
      this.waiters.add(waiter);
    });
  }

  /**
   * The upstream answered 401 to `token`. When it is the current token it is dropped and a renewal
   * starts, at most once per 5 s and never against backoff. Within 5 s of the previous forced
   * renewal the token is kept and nothing is requested: the newest token was just issued, and
   * hammering the endpoint will not make the upstream accept it sooner.
   * A token that is no longer the current one (a renewal replaced it while the request was on its
   * way, and it expired or was revoked upstream) changes nothing here.
   * Returns true when a replay would not carry the same token again: it gets a newer token, waits
   * for one, or gets `token_unavailable` like any request made while no token is valid. False only
   * when the rejected token is kept (rate limit with nothing in flight) or the keeper is stopped.
   */
  invalidate(token: string): boolean {
    if (this.stopped) return false;
    if (this.current?.accessToken !== token) return true;
    const now = this.clock.now();
    if (this.lastForcedAt !== undefined && now - this.lastForcedAt < FORCED_RENEWAL_INTERVAL_MS) {
      this.log.warn(
        { event: 'token', reason: 'forced', rateLimited: true },
        'upstream rejected the newest access token again within 5 s of a forced renewal; keeping it',
      );
      return this.inflight !== undefined;
    }
    this.lastForcedAt = now;
    this.current = undefined;
    const inBackoff = this.inflight === undefined && now < this.notBefore;
    const renewNow = this.inflight === undefined && !inBackoff;
    let what = 'a token request is already in flight';
    if (renewNow) what = 'renewing';
    if (inBackoff) what = 'dropped it, the next attempt is after the backoff';
    this.log.info(
      {
        event: 'token',
        reason: 'forced',
        ...(inBackoff && { nextAttemptAt: iso(this.notBefore) }),
      },
      `upstream rejected the access token; ${what}`,
    );
    if (renewNow) this.attempt('forced');
    return true;
  }

  /** True while a valid token is held. */
  isReady(): boolean {
    return this.validToken() !== undefined;
  }

  /** Resolves on the first successful grant; rejects if the keeper is stopped before that. */
  whenReady(): Promise<void> {
    if (this.latest !== undefined) return Promise.resolve();
    if (this.stopped) {
      return Promise.reject(new TokenUnavailableError('the token keeper is stopped', 1));
    }
    return new Promise<void>((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  status(): KeeperStatus {
    return {
      ready: this.isReady(),
      lastGrant: this.latest?.grant ?? null,
      tokenAgeSeconds: this.tokenAgeSeconds() ?? null,
      expiresInSeconds: this.tokenExpiresInSeconds(),
      lifetimeSeconds: this.current?.lifetimeSeconds ?? null,
      nextRenewalAt: this.nextAttemptAt === undefined ? null : iso(this.nextAttemptAt),
      refreshTokenHeld: this.refreshToken !== undefined,
      lastError: this.lastError === null ? null : { ...this.lastError },
      consecutiveFailures: this.consecutiveFailures,
      requestInFlight: this.inflight !== undefined,
    };
  }

  /** The most recent successful grant (for `check`), or undefined before the first one. */
  lastResult(): LastResult | undefined {
    return this.latest === undefined ? undefined : { ...this.latest };
  }

  tokenAgeSeconds(): number | undefined {
    if (this.current === undefined) return undefined;
    return Math.max(0, (this.clock.now() - this.current.sentAt) / 1_000);
  }

  tokenExpiresInSeconds(): number {
    if (this.current === undefined) return 0;
    return Math.max(0, (this.current.expiresAt - this.clock.now()) / 1_000);
  }

  tokenReady(): boolean {
    return this.isReady();
  }

  private validToken(): string | undefined {
    const held = this.current;
    if (held === undefined || this.clock.now() >= held.expiresAt) return undefined;
    return held.accessToken;
  }

  /** Starts one token request unless one is in flight (single flight). */
  private attempt(reason: AttemptReason): void {
    if (this.inflight !== undefined || this.stopped) return;
    this.clearTimer();
    this.nextAttemptAt = undefined;
    this.log.debug({ event: 'token', reason }, 'token request starting');
    this.inflight = this.obtain()
      .then((outcome) => this.settle(outcome))
      .catch((error: unknown) => {
        // settle() does not throw; if it ever does, keep the keeper alive and retrying.
        this.inflight = undefined;
        if (!this.stopped) this.onFailure({ ok: false, grant: 'client_credentials', error });
      });
  }

  /** Refresh grant while a refresh token is held, else (or once it is rejected) client credentials. */
  private async obtain(): Promise<Outcome> {
    const refreshToken = this.refreshToken;
    if (refreshToken !== undefined) {
      const refreshed = await this.call({ grant: 'refresh_token', refreshToken });
      if (refreshed.ok || !isRejected(refreshed.error)) return refreshed;
      // The refresh token is dead (revoked, expired or already used): client credentials at once.
      if (this.refreshToken === refreshToken) this.refreshToken = undefined;
      this.logFailure(refreshed.grant, refreshed.error, 'falling back to client credentials');
      if (this.stopped) return refreshed;
    }
    let credentials: ClientCredentials;
    try {
      credentials = await this.readCredentials();
    } catch (error) {
      return { ok: false, grant: 'client_credentials', error: new CredentialsReadError(error) };
    }
    this.noteCredentials(credentials);
    return this.call({ grant: 'client_credentials', credentials });
  }

  /** One token endpoint call, with its metrics. Never rejects. */
  private async call(request: GrantRequest): Promise<Outcome> {
    const grant = request.grant;
    // expiresAt counts from the moment the request was sent, not from when the answer arrived.
    const sentAt = this.clock.now();
    try {
      const tokenSet = await this.endpoint.requestToken(request);
      this.metrics.tokenRequests.inc({ grant, outcome: 'success' });
      return { ok: true, grant, tokenSet, sentAt };
    } catch (error) {
      this.metrics.tokenRequests.inc({ grant, outcome: isRejected(error) ? 'rejected' : 'error' });
      return { ok: false, grant, error };
    } finally {
      this.metrics.tokenRequestDuration.observe({ grant }, (this.clock.now() - sentAt) / 1_000);
    }
  }

  private settle(outcome: Outcome): void {
    this.inflight = undefined;
    if (this.stopped) return;
    if (outcome.ok) this.onSuccess(outcome);
    else this.onFailure(outcome);
  }

  private onSuccess({ grant, tokenSet, sentAt }: Extract<Outcome, { ok: true }>): void {
    const lifetimeSeconds = tokenSet.expiresInSeconds;
    this.current = {
      accessToken: tokenSet.accessToken,
      sentAt,
      expiresAt: sentAt + lifetimeSeconds * 1_000,
      lifetimeSeconds,
    };
    // string: replace (refresh tokens may be single-use, so only the newest is kept);
    // null: the API's "about to expire" signal, drop it; absent: keep the held one (RFC 6749 §6).
    if (typeof tokenSet.refreshToken === 'string') this.refreshToken = tokenSet.refreshToken;
    else if (tokenSet.refreshToken === null) this.refreshToken = undefined;
    this.latest = {
      grant,
      expiresInSeconds: lifetimeSeconds,
      refreshTokenReceived: typeof tokenSet.refreshToken === 'string',
    };
    this.consecutiveFailures = 0;
    this.notBefore = 0;

    const now = this.clock.now();
    const renewAt = Math.max(
      renewalTime(sentAt, lifetimeSeconds, this.settings, this.random()),
      now + MIN_RENEWAL_DELAY_MS,
    );
    this.schedule(renewAt, 'renewal');

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

    for (const waiter of this.waiters) {
      this.settleWaiter(waiter);
      waiter.resolve(tokenSet.accessToken);
    }
    for (const waiter of this.readyWaiters.splice(0)) waiter.resolve();
  }

  /** Any failure, including a rejected client-credentials grant (the secret may be rotated soon). */
  private onFailure({ grant, error }: Extract<Outcome, { ok: false }>): void {
    this.consecutiveFailures += 1;
    const retryAfterMs = error instanceof TokenEndpointError ? error.retryAfterMs : undefined;
    const now = this.clock.now();
    this.notBefore = now + backoffDelayMs(this.consecutiveFailures, this.random(), retryAfterMs);
    this.schedule(this.notBefore, 'retry');
    this.lastError = { kind: errorKind(error), message: errorMessage(error), at: iso(now) };
    this.logFailure(grant, error, `retrying at ${iso(this.notBefore)}`);
    // Waiters keep waiting: the retry may land within their waitMs.
  }

  private schedule(at: number, reason: AttemptReason): void {
    this.clearTimer();
    this.nextAttemptAt = at;
    this.timer = this.clock.setTimeout(
      () => {
        this.timer = undefined;
        this.attempt(reason);
      },
      Math.max(0, at - this.clock.now()),
    );
    unref(this.timer);
  }

  private clearTimer(): void {
    if (this.timer === undefined) return;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private settleWaiter(waiter: Waiter): void {
    if (waiter.timer !== undefined) this.clock.clearTimeout(waiter.timer);
    this.waiters.delete(waiter);
  }

  private unavailable(): TokenUnavailableError {
    const now = this.clock.now();
    const retryAfter =
      this.inflight === undefined && this.nextAttemptAt !== undefined
        ? secondsUntil(this.nextAttemptAt, now)
        : 1;
    const reason =
      this.lastError === null
        ? 'no token yet'
        : `last token endpoint error: ${this.lastError.kind}: ${this.lastError.message}`;
    return new TokenUnavailableError(
      `no valid access token within ${this.settings.waitMs} ms (${reason})`,
      retryAfter,
    );
  }

  /** Logs when the credentials change (a rotated secret picked up), by non-secret fingerprint. */
  private noteCredentials(credentials: ClientCredentials): void {
    const fingerprint = credentialsFingerprint(credentials);
    const previous = this.credentialsFingerprint;
    if (previous !== undefined && fingerprint !== previous) {
      this.log.info(
        { event: 'credentials', clientId: credentials.clientId, previous, current: fingerprint },
        'client credentials changed; using the new ones',
      );
    }
    this.credentialsFingerprint = fingerprint;
  }

  private logFailure(grant: GrantType, error: unknown, next: string): void {
    const fields = {
      event: 'token',
      grant,
      outcome: isRejected(error) ? 'rejected' : 'error',
      errorKind: errorKind(error),
      error: errorMessage(error),
      status: error instanceof TokenEndpointError ? error.status : undefined,
      oauthError: error instanceof TokenEndpointError ? error.oauthError : undefined,
      consecutiveFailures: this.consecutiveFailures,
      tokenValid: this.isReady(),
    };
    this.log.warn(fields, `token request failed; ${next}`);
  }
}

/** The credentials reader threw (missing file, unreadable CSV): retried like a transient error. */
class CredentialsReadError extends Error {
  constructor(cause: unknown) {
    super(`could not read the client credentials: ${errorMessage(cause)}`, { cause });
    this.name = 'CredentialsReadError';
  }
}

function isRejected(error: unknown): boolean {
  return error instanceof TokenEndpointError && error.kind === 'rejected';
}

function errorKind(error: unknown): KeeperErrorKind {
  if (error instanceof TokenEndpointError) return error.kind;
  if (error instanceof CredentialsReadError) return 'credentials';
  return 'internal';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Keeper timers never keep the process alive on their own. */
function unref(handle: TimerHandle | undefined): void {
  handle?.unref?.();
}
