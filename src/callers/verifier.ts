/**
 * A caller's token verified offline with jose (docs/configuration.md "Caller identity"):
 * signature under RS256, ES256 or PS256 only, `iss`, `aud`, `exp` and `sub` required, `nbf`/`iat`
 * honoured with CLOCK_TOLERANCE_SECONDS of leeway, tokens over MAX_TOKEN_BYTES refused unparsed. A
 * verified token is remembered by its SHA-256 for as long as jose accepts it (until its `exp` plus
 * the leeway; at most MAX_REMEMBERED of them), so a caller that reuses its token costs a hash and a
 * lookup, not a signature check. A token refused for what its bytes and the keys decide (malformed,
 * algorithm, signature, claims, expired) is refused again from memory for REFUSAL_MEMORY_MS (at
 * most MAX_REFUSALS of them, apart from the verified ones), so a client stuck with an expired token
 * costs a lookup per retry, not a signature check.
 */
import { hash as digest } from 'node:crypto';
import { errors, jwtVerify, type JWTVerifyGetKey, type JWTVerifyResult } from 'jose';
import { LRUCache } from 'lru-cache';
import type { Clock } from '../clock.js';
import { KeysUnavailableError } from './keys.js';

export const ALGORITHMS = ['RS256', 'ES256', 'PS256'];
export const MAX_TOKEN_BYTES = 8 * 1024;
export const CLOCK_TOLERANCE_SECONDS = 30;
export const MAX_REMEMBERED = 10_000;
export const MAX_REFUSALS = 1_000;
export const REFUSAL_MEMORY_MS = 60_000;
/** Keys a token without a `kid` is tried under when several match it. */
export const MAX_KEYS_TRIED = 4;

/**
 * The refusals the token and the key set alone decide. Not `not_yet_valid` (time makes it valid),
 * `unknown_key` (a fetch may bring the key) or `keys_unavailable` (the keys' source may come back).
 */
const FINAL_REFUSALS: ReadonlySet<string> = new Set<CallerCheck>([
  'malformed',
  'algorithm',
  'signature',
  'claims',
  'expired',
]);

/** Which check refused a token: the request line's `callerCheck`, the metric's `result`. */
export type CallerCheck =
  | 'missing'
  | 'malformed'
  | 'algorithm'
  | 'signature'
  | 'unknown_key'
  | 'claims'
  | 'expired'
  | 'not_yet_valid'
  | 'keys_unavailable';

/** A verified caller: its `sub`, and when jose stops accepting its token (ms since the epoch). */
export interface VerifiedCaller {
  readonly subject: string;
  /** The token's `exp` plus CLOCK_TOLERANCE_SECONDS: from then on it is refused as expired. */
  readonly expiresAt: number;
}

export interface VerifierOptions {
  issuer: string;
  audience: string;
  getKey: JWTVerifyGetKey;
  clock: Pick<Clock, 'now'>;
  maxRemembered?: number;
  maxRefusals?: number;
}

/** A token refused before, and when that stops being remembered (ms since the epoch). */
interface Refusal {
  readonly check: CallerCheck;
  readonly expiresAt: number;
}

export class CallerVerifier {
  readonly #options: VerifierOptions;
  readonly #remembered: LRUCache<string, VerifiedCaller>;
  /** Apart from the verified tokens: a flood of refused ones never pushes a verified one out. */
  readonly #refused: LRUCache<string, Refusal>;
  /** Counts `forget()`s: a verdict reached across one (the keys changed meanwhile) is not kept. */
  #generation = 0;

  constructor(options: VerifierOptions) {
    this.#options = options;
    this.#remembered = new LRUCache({ max: options.maxRemembered ?? MAX_REMEMBERED });
    this.#refused = new LRUCache({ max: options.maxRefusals ?? MAX_REFUSALS });
  }

  /**
   * The caller a token proves: synchronously when the token was verified before and has not
   * expired, else a promise of jose's verdict. A check's name when it is refused.
   */
  check(token: string): VerifiedCaller | CallerCheck | Promise<VerifiedCaller | CallerCheck> {
    if (token.length > MAX_TOKEN_BYTES) return 'malformed';
    // The one-shot digest: no Hash object per request, unlike createHash().update().digest().
    const hash = digest('sha256', token, 'base64');
    const known = this.#unexpired(this.#remembered, hash);
    if (known !== undefined) return known;
    const refused = this.#unexpired(this.#refused, hash);
    if (refused !== undefined) return refused.check;
    return this.#verify(token, hash);
  }

  /** `cache`'s entry for `hash` until its `expiresAt`; one past it is dropped. */
  #unexpired<V extends { readonly expiresAt: number }>(
    cache: LRUCache<string, V>,
    hash: string,
  ): V | undefined {
    const entry = cache.get(hash);
    if (entry === undefined || entry.expiresAt > this.#options.clock.now()) return entry;
    cache.delete(hash);
    return undefined;
  }

  /**
   * The key set changed: a token verified under a key now gone must be verified again, and one
   * refused under the old keys may verify under the new ones.
   */
  forget(): void {
    this.#generation += 1;
    this.#remembered.clear();
    this.#refused.clear();
  }

  async #verify(token: string, hash: string): Promise<VerifiedCaller | CallerCheck> {
    const now = this.#options.clock.now();
    const generation = this.#generation;
    try {
      const { payload } = await this.#jwtVerify(token, now);
      if (typeof payload.sub !== 'string' || typeof payload.exp !== 'number') {
        return this.#refuse(hash, 'claims', generation);
      }
      // jose judges `iat` only beside a maximum age: one in the future is not yet valid either.
      if (typeof payload.iat === 'number' && payload.iat > now / 1000 + CLOCK_TOLERANCE_SECONDS) {
        return this.#refuse(hash, 'not_yet_valid', generation);
      }
      // Remembered while jose would accept it again: a token used through the leeway after its
      // `exp` stays a lookup instead of a signature check per request.
      const expiresAt = (payload.exp + CLOCK_TOLERANCE_SECONDS) * 1000;
      const verified = { subject: payload.sub, expiresAt };
      // Checked under keys since replaced (a revoked one, maybe): this request's verdict only.
      if (generation === this.#generation) this.#remembered.set(hash, verified);
      return verified;
    } catch (error) {
      return this.#refuse(hash, checkOf(error), generation);
    }
  }

  /**
   * jose's verdict. A token without a `kid` that several keys match is tried under each, as jose
   * documents for `JWKSMultipleMatchingKeys`, at most MAX_KEYS_TRIED of them (each try is a
   * signature check, and a made-up token is refused after as many).
   */
  async #jwtVerify(token: string, now: number): Promise<JWTVerifyResult> {
    const { issuer, audience, getKey } = this.#options;
    const options = {
      algorithms: ALGORITHMS,
      issuer,
      audience,
      requiredClaims: ['exp', 'sub'],
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      currentDate: new Date(now),
    };
    try {
      return await jwtVerify(token, getKey, options);
    } catch (error) {
      if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
      let tried = 0;
      for await (const key of error) {
        try {
          return await jwtVerify(token, key, options);
        } catch (inner) {
          if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
        }
        tried += 1;
        if (tried === MAX_KEYS_TRIED) break;
      }
      throw new errors.JWSSignatureVerificationFailed();
    }
  }

  /** A refusal its token will meet again is remembered for REFUSAL_MEMORY_MS. */
  #refuse(hash: string, check: CallerCheck, generation: number): CallerCheck {
    if (FINAL_REFUSALS.has(check) && generation === this.#generation) {
      const expiresAt = this.#options.clock.now() + REFUSAL_MEMORY_MS;
      this.#refused.set(hash, { check, expiresAt });
    }
    return check;
  }
}

/** jose's error as the check that failed (the order matters: JWTExpired is a claim failure). */
export function checkOf(error: unknown): CallerCheck {
  if (error instanceof KeysUnavailableError) return 'keys_unavailable';
  if (error instanceof errors.JWTExpired) return 'expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    return error.claim === 'nbf' || error.claim === 'iat' ? 'not_yet_valid' : 'claims';
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return 'algorithm';
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'signature';
  if (error instanceof errors.JWKSNoMatchingKey) return 'unknown_key';
  return 'malformed';
}
