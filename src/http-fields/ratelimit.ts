/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy` items
 * (`q` quota units per `w` seconds) and `RateLimit` items (`r` units remaining, `t` seconds until
 * the quota is available again), each item a quoted policy name with its parameters.
 */

/** A `RateLimit-Policy` item: `"<name>";q=<quota>;w=<window seconds>`. */
export function rateLimitPolicyItem(name: string, quota: number, windowSeconds: number): string {
  return `"${name}";q=${quota};w=${windowSeconds}`;
}

/** A `RateLimit` item: `"<name>";r=<remaining>;t=<seconds>`. */
export function rateLimitItem(name: string, remaining: number, seconds: number): string {
  return `"${name}";r=${remaining};t=${seconds}`;
}
