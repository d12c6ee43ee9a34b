import { describe, expect, it } from 'vitest';
import { editDistance, nearest } from './nearest.js';

describe('did you mean', () => {
  it('counts insertions, deletions and substitutions', () => {
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('same', 'same')).toBe(0);
  });

  it('suggests the nearest known name within the distance, ignoring case', () => {
    const known = ['UPSTREAM_BASE_URL', 'UPSTREAM_CA_FILE', 'TOKEN_URL'];
    expect(nearest('upstream_base_ulr', known, 2)).toBe('UPSTREAM_BASE_URL');
    expect(nearest('TOKEN_URI', known, 2)).toBe('TOKEN_URL');
    expect(nearest('SOMETHING_ELSE', known, 2)).toBeUndefined();
  });
});
