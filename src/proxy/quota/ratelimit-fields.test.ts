import { describe, expect, it } from 'vitest';
import { TokenBucket } from './bucket.js';
import { rateLimitFields, rateLimitPolicy } from './ratelimit-fields.js';

describe('RateLimit fields', () => {
  const limit = { count: 10, periodMs: 60_000 };

  it('the policy names the quota and its window in seconds (at least 1)', () => {
    expect(rateLimitPolicy(limit)).toBe('"upstream";q=10;w=60');
    expect(rateLimitPolicy({ count: 5, periodMs: 100 })).toBe('"upstream";q=5;w=1');
  });

  it("r is the whole slots free; t the seconds until the caller's share is free again", () => {
    const bucket = new TokenBucket(limit, 0);
    bucket.take(10, 0);
    // Half the rate is this caller's: 5 slots, one every 6 s.
    const fields = rateLimitFields(rateLimitPolicy(limit), limit, bucket, 0.5, 0);
    expect(fields.ratelimit).toBe('"upstream";r=0;t=30');
    expect(fields['ratelimit-policy']).toBe('"upstream";q=10;w=60');
  });

  it("on the sidecar's own 429, t is its Retry-After", () => {
    const bucket = new TokenBucket(limit, 0);
    const fields = rateLimitFields(rateLimitPolicy(limit), limit, bucket, 1, 0, 7);
    expect(fields.ratelimit).toBe('"upstream";r=10;t=7');
  });
});
