import { describe, expect, it } from 'vitest';
import { normalizedPath, storableSeconds } from './directives.js';

const NOW = Date.parse('2026-11-24T12:00:00Z');

describe('storableSeconds', () => {
  it('is the rule TTL without directives', () => {
    expect(storableSeconds(60, { cacheControl: undefined }, NOW)).toBe(60);
    expect(storableSeconds(60, { cacheControl: 'public' }, NOW)).toBe(60);
  });
  it('is the smaller of the rule and max-age; s-maxage takes precedence over max-age', () => {
    expect(storableSeconds(60, { cacheControl: 'max-age=5' }, NOW)).toBe(5);
    expect(storableSeconds(60, { cacheControl: 'max-age=600' }, NOW)).toBe(60);
    expect(storableSeconds(60, { cacheControl: 'max-age=5, s-maxage=30' }, NOW)).toBe(30);
  });
  it('is 0 for no-store, unqualified no-cache and malformed freshness', () => {
    expect(storableSeconds(60, { cacheControl: 'no-store' }, NOW)).toBe(0);
    expect(storableSeconds(60, { cacheControl: 'no-cache' }, NOW)).toBe(0);
    expect(storableSeconds(60, { cacheControl: 'max-age=abc' }, NOW)).toBe(0);
    expect(storableSeconds(60, { cacheControl: 'max-age=-1' }, NOW)).toBe(0);
    expect(storableSeconds(60, { cacheControl: 'no-cache="set-cookie"' }, NOW)).toBe(60);
  });
});

describe('storage refusals (RFC 9111 §3, §5.3)', () => {
  it('private, qualified or not, is never stored by this shared cache', () => {
    expect(storableSeconds(60, { cacheControl: 'private' }, NOW)).toBe(0);
    expect(storableSeconds(60, { cacheControl: 'max-age=30, private="x"' }, NOW)).toBe(0);
  });
  it('an Expires already past (at the answer Date, else now), or invalid, without max-age', () => {
    const past = new Date(NOW - 1_000).toUTCString();
    const future = new Date(NOW + 60_000).toUTCString();
    expect(storableSeconds(60, { cacheControl: undefined, expires: past }, NOW)).toBe(0);
    expect(storableSeconds(60, { cacheControl: undefined, expires: '0' }, NOW)).toBe(0);
    expect(storableSeconds(60, { cacheControl: undefined, expires: future }, NOW)).toBe(60);
    // Measured against the answer's Date: an Expires equal to it is past.
    const date = new Date(NOW + 3_600_000).toUTCString();
    expect(storableSeconds(60, { cacheControl: undefined, expires: future, date }, NOW)).toBe(0);
    // max-age wins over Expires (RFC 9111 §5.3).
    expect(storableSeconds(60, { cacheControl: 'max-age=30', expires: past }, NOW)).toBe(30);
  });
});

describe('normalizedPath', () => {
  it('decodes percent-encoded unreserved characters and upper-cases the rest', () => {
    expect(normalizedPath('/v1.0/item/%61')).toBe('/v1.0/item/a');
    expect(normalizedPath('/v1.0/%7e%2D%2e%5F')).toBe('/v1.0/~-._');
    expect(normalizedPath('/v1.0/a%2fb%3a')).toBe('/v1.0/a%2Fb%3A');
    expect(normalizedPath('/v1.0/plain')).toBe('/v1.0/plain');
  });
});
