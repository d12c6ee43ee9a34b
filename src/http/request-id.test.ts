import { describe, expect, it } from 'vitest';
import { resolveRequestId } from './request-id.js';

describe('resolveRequestId', () => {
  const generate = () => 'generated';
  it.each(['a', 'abc.DEF_1-2', 'x'.repeat(128)])('keeps %s', (id) => {
    expect(resolveRequestId(id, generate)).toBe(id);
  });
  it.each(['', 'x'.repeat(129), 'has space', 'a,b', 'ünï', 'a/b', 'a\nb'])('replaces %j', (id) => {
    expect(resolveRequestId(id, generate)).toBe('generated');
  });
  it('replaces a missing or repeated header', () => {
    expect(resolveRequestId(undefined, generate)).toBe('generated');
    expect(resolveRequestId(['a', 'b'], generate)).toBe('generated');
  });
});
