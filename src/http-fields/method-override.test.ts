import { describe, expect, it } from 'vitest';
import { overrideOutside } from './method-override.js';

describe('overrideOutside', () => {
  it('names the first override field with a method outside the allowed ones, any case or list', () => {
    const allowed = ['GET', 'HEAD'];
    expect(overrideOutside({}, allowed)).toBeUndefined();
    expect(overrideOutside({ 'x-http-method-override': 'get' }, allowed)).toBeUndefined();
    expect(overrideOutside({ 'x-http-method': ' Head ' }, allowed)).toBeUndefined();
    expect(overrideOutside({ 'x-http-method-override': 'DELETE' }, allowed)).toEqual({
      field: 'x-http-method-override',
    });
    expect(overrideOutside({ 'x-method-override': 'GET, PATCH' }, allowed)).toEqual({
      field: 'x-method-override',
    });
    expect(overrideOutside({ 'x-http-method': ['GET', 'PUT'] }, allowed)).toEqual({
      field: 'x-http-method',
    });
    // An empty value names no allowed method either: refused rather than guessed at.
    expect(overrideOutside({ 'x-http-method': '' }, allowed)).toEqual({ field: 'x-http-method' });
  });
});
