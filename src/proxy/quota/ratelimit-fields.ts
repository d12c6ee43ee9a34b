/**
 * The RateLimit fields on answers under a rate limit, from the bucket and the caller's share:
 * `RateLimit-Policy: "upstream";q=N;w=<period seconds>` and
 * `RateLimit: "upstream";r=<slots free now>;t=<seconds until the caller's share is free again>`
 * (the grammar: http-fields/ratelimit.ts).
 */
import { rateLimitItem, rateLimitPolicyItem } from '../../http-fields/ratelimit.js';
import type { RateLimit, TokenBucket } from './bucket.js';

/** The policy's name in both fields. */
const POLICY = 'upstream';

export type RateLimitFields = {
  'ratelimit-policy': string;
  ratelimit: string;
};

/** The policy field of `limit`: fixed for the process's life. */
export function rateLimitPolicy(limit: RateLimit): string {
  return rateLimitPolicyItem(POLICY, limit.count, Math.max(1, Math.round(limit.periodMs / 1000)));
}

/**
 * Where a caller stands now: `r` the whole slots free (never below 0), `t` the whole seconds until
 * the bucket again holds the caller's share of it (`share`: its weight ÷ the active weights) — or,
 * on a 429 the sidecar answers, its `Retry-After` (`retryAfterSeconds`): `t` never understates the
 * wait the refusal names (draft-ietf-httpapi-ratelimit-headers).
 */
export function rateLimitFields(
  policy: string,
  limit: RateLimit,
  bucket: TokenBucket,
  share: number,
  now: number,
  retryAfterSeconds?: number,
): RateLimitFields {
  const free = Math.max(0, Math.floor(bucket.available(now) + 1e-9));
  const slots = Math.max(1, Math.floor(limit.count * share));
  const seconds = retryAfterSeconds ?? Math.ceil(bucket.msUntil(slots, now) / 1000);
  return { 'ratelimit-policy': policy, ratelimit: rateLimitItem(POLICY, free, seconds) };
}
