import { describe, expect, it } from 'vitest';
import { ageSeconds } from './age.js';

describe('ageSeconds', () => {
  it.each([
    ['100', 100],
    [' 7 ', 7],
    ['0', 0],
    [['20', '30'], 20],
    ['99999999999999', 2 ** 31],
  ] as const)('reads %j as %d', (value, seconds) => {
    expect(ageSeconds(value as string | string[])).toBe(seconds);
  });

  it.each([undefined, '', '-5', '1.5', '10, 20', 'soon'])('ignores %j', (value) => {
    expect(ageSeconds(value)).toBe(0);
  });
});
