import { describe, expect, it } from 'vitest';
import { rateLimitItem, rateLimitPolicyItem } from './ratelimit.js';

describe('RateLimit fields', () => {
  it('write the policy and the current state as quoted items with their parameters', () => {
    expect(rateLimitPolicyItem('upstream', 100, 60)).toBe('"upstream";q=100;w=60');
    expect(rateLimitItem('upstream', 0, 3)).toBe('"upstream";r=0;t=3');
  });
});
