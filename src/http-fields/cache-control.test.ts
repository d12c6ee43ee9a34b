import { describe, expect, it } from 'vitest';
import { parseCacheControl, requestDirective, varyFields } from './cache-control.js';

describe('parseCacheControl', () => {
  it('reads names case-insensitively, arguments unquoted, the first of a repeated directive', () => {
    const d = parseCacheControl(['Max-Age=60, no-cache="set-cookie"', 'max-age=5']);
    expect(d.get('max-age')).toBe('60');
    expect(d.get('no-cache')).toBe('set-cookie');
  });
});

describe('requestDirective', () => {
  it('no-store wins over no-cache', () => {
    expect(requestDirective('no-cache, no-store', undefined)).toBe('no-store');
  });
  it('no-cache, max-age=0 and Pragma: no-cache refresh', () => {
    expect(requestDirective('no-cache', undefined)).toBe('no-cache');
    expect(requestDirective('max-age=0', undefined)).toBe('no-cache');
    expect(requestDirective(undefined, 'no-cache')).toBe('no-cache');
  });
  it('anything else uses the cache', () => {
    expect(requestDirective(undefined, undefined)).toBe('none');
    expect(requestDirective('max-age=60', 'x')).toBe('none');
  });
});

describe('varyFields', () => {
  it('lower-cases, dedupes and sorts; * means never reusable', () => {
    expect(varyFields(undefined)).toEqual([]);
    expect(varyFields('Accept-Language, accept, Accept-Language')).toEqual([
      'accept',
      'accept-language',
    ]);
    expect(varyFields(['accept', '*'])).toBeUndefined();
  });
});
