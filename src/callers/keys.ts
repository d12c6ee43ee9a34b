/**
 * The callers' verification keys (docs/configuration.md "Caller identity"): fetched at start,
 * refreshed in the background, fetched on a request's path only for a token under an unknown
 * `kid` and then at most once per UNKNOWN_KID_INTERVAL_MS (counting every fetch); the keys held
 * keep serving through an outage of their source. Time comes from the injected clock.
 */
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { withDeadline, type Clock, type TimerHandle } from '../clock.js';
import { errorText } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';

/** Where a key set comes from: a URL (discovery, CA, bearer) or a mounted file (jwks-source.ts). */
export interface JwksSource {
  /** The key set, or a rejection saying why not (never with a secret in it). */
  fetch(): Promise<JSONWebKeySet>;
  /** What the logs and /status name: the URL or the file. */
  readonly description: string;
}

/** A token under an unknown `kid` fetches the keys at most once per this long. */
export const UNKNOWN_KID_INTERVAL_MS = 30_000;
/**
 * Longest a request under an unknown `kid` waits for the fetch it triggered or found running: a
 * slow key source must not let made-up tokens hold `proxy.maxInFlight` slots.
 */
export const UNKNOWN_KID_WAIT_MS = 5_000;
/** Background refresh of a key set that was fetched. */
export const REFRESH_MS = 5 * 60_000;
/** First retry after a failed fetch; doubles up to MAX_RETRY_MS. */
export const RETRY_MS = 1_000;
export const MAX_RETRY_MS = 30_000;
/**
 * One fetch, whatever its source does (a mount or peer that never answers): then it fails, the
 * requests waiting for it go on, and it is retried. Above a URL source's own limits (10 s a
 * document, discovery then keys).
 */
export const ATTEMPT_DEADLINE_MS = 30_000;

/** No key set held yet: nothing can be verified. */
export class KeysUnavailableError extends Error {
  constructor() {
    super('no caller keys yet');
    this.name = 'KeysUnavailableError';
  }
}

export interface CallerKeysOptions {
  source: JwksSource;
  clock: Clock;
  logger: Logger;
  /** Background refresh period; default REFRESH_MS (a mounted file: shorter, it costs a read). */
  refreshMs?: number;
  /** Called when a fetch brought a different key set (the remembered tokens are forgotten). */
  onChange?: () => void;
}

/** What /status shows of the keys: never a key's material, only ids and times. */
export interface CallerKeysStatus {
  source: string;
  keys: number;
  kids: string[];
  fetchedAt: string | undefined;
  lastError: string | undefined;
}

export class CallerKeys {
  readonly #source: JwksSource;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #refreshMs: number;
  readonly #onChange: (() => void) | undefined;
  readonly #startedAt: number;
  #getKey: JWTVerifyGetKey | undefined;
  #held = '';
  #kids: string[] = [];
  #fetchedAt: number | undefined;
  #lastError: string | undefined;
  #lastAttempt = Number.NEGATIVE_INFINITY;
  #failures = 0;
  #inFlight: Promise<void> | undefined;
  #timer: TimerHandle | undefined;
  #stopped = false;

  constructor(options: CallerKeysOptions) {
    this.#source = options.source;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#refreshMs = options.refreshMs ?? REFRESH_MS;
    this.#onChange = options.onChange;
    this.#startedAt = options.clock.now();
  }

  /** The first fetch; the next ones schedule themselves. */
  start(): Promise<void> {
    return this.#fetch();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** A key set is held (readiness: "no caller keys yet" until then). */
  get ready(): boolean {
    return this.#getKey !== undefined;
  }

  /** Seconds since the keys held were fetched (since start while none is): the alert's input. */
  ageSeconds(): number {
    return (this.#clock.now() - (this.#fetchedAt ?? this.#startedAt)) / 1000;
  }

  status(): CallerKeysStatus {
    return {
      source: this.#source.description,
      keys: this.#kids.length,
      kids: this.#kids,
      fetchedAt:
        this.#fetchedAt === undefined ? undefined : new Date(this.#fetchedAt).toISOString(),
      lastError: this.#lastError,
    };
  }

  /**
   * jose's key lookup (`jwtVerify`'s second argument): the key for the token's header from the
   * set held; an unknown `kid` fetches the set again (throttled) and looks once more.
   */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    const held = this.#getKey;
    if (held === undefined) throw new KeysUnavailableError();
    try {
      return await held(header, token);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey) || !(await this.#fetchForUnknownKid())) {
        throw error;
      }
      return this.#getKey!(header, token);
    }
  };

  /**
   * True when a fetch ran (or was running) for this request and ended within UNKNOWN_KID_WAIT_MS;
   * false while throttled or when the fetch takes longer (the request is refused, not held).
   */
  async #fetchForUnknownKid(): Promise<boolean> {
    if (
      this.#inFlight === undefined &&
      this.#clock.now() - this.#lastAttempt < UNKNOWN_KID_INTERVAL_MS
    ) {
      return false;
    }
    try {
      await withDeadline(this.#fetch(), this.#clock, UNKNOWN_KID_WAIT_MS, 'the key fetch');
      return true;
    } catch {
      return false;
    }
  }

  /** One fetch at a time; the next one is scheduled from its outcome. */
  #fetch(): Promise<void> {
    this.#inFlight ??= this.#attempt().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  async #attempt(): Promise<void> {
    this.#lastAttempt = this.#clock.now();
    let delay: number;
    try {
      this.#apply(
        await withDeadline(
          this.#source.fetch(),
          this.#clock,
          ATTEMPT_DEADLINE_MS,
          'fetching the caller keys',
        ),
      );
      this.#failures = 0;
      this.#lastError = undefined;
      delay = this.#refreshMs;
    } catch (error) {
      this.#failures += 1;
      this.#lastError = errorText(error).slice(0, 300);
      delay = Math.min(RETRY_MS * 2 ** (this.#failures - 1), MAX_RETRY_MS, this.#refreshMs);
      this.#logger.warn(
        {
          event: 'caller_keys',
          source: this.#source.description,
          failures: this.#failures,
          held: this.#kids.length,
          retryInMs: delay,
          reason: this.#lastError,
        },
        this.ready
          ? 'could not refresh the caller keys; the keys held keep serving'
          : 'could not fetch the caller keys; callers are refused until they come',
      );
    }
    this.#schedule(delay);
  }

  #apply(jwks: JSONWebKeySet): void {
    if (
      typeof jwks !== 'object' ||
      jwks === null ||
      !Array.isArray(jwks.keys) ||
      jwks.keys.length === 0
    ) {
      throw new Error('the key set holds no keys');
    }
    const text = JSON.stringify(jwks.keys);
    if (text !== this.#held) this.#replace(jwks, text);
    // Only a set taken counts as fetched: a malformed one leaves the keys (and the alert) aging.
    this.#fetchedAt = this.#clock.now();
  }

  /** A new key set; throws on a malformed one (jose's own check), and the keys held stay. */
  #replace(jwks: JSONWebKeySet, text: string): void {
    const getKey = createLocalJWKSet(jwks);
    const first = this.#getKey === undefined;
    this.#getKey = getKey;
    this.#held = text;
    this.#kids = jwks.keys.map((key) => key.kid ?? '(no kid)');
    this.#logger.info(
      { event: 'caller_keys', source: this.#source.description, kids: this.#kids },
      first ? 'caller keys fetched' : 'caller keys changed',
    );
    if (!first) this.#onChange?.();
  }

  #schedule(delay: number): void {
    if (this.#stopped) return;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      void this.#fetch();
    }, delay);
    this.#timer.unref?.();
  }
}
