/** The token set inside the sealed value: short names out, every field checked on the way back. */
import { describe, expect, it } from 'vitest';
import { parseSet, toWire, type SharedTokenSet } from './token-set-wire.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const set: SharedTokenSet = {
  accessToken: 'access-1',
  refreshToken: 'refresh-1',
  sentAt: T0,
  lifetimeSeconds: 1799,
  grant: 'refresh_token',
};

describe('token set wire form', () => {
  it('short names; an absent refresh token is left out, not written as null', () => {
    expect(toWire(set)).toEqual({
      a: 'access-1',
      r: 'refresh-1',
      s: T0,
      l: 1799,
      g: 'refresh_token',
    });
    expect(toWire({ ...set, refreshToken: undefined })).not.toHaveProperty('r');
  });

  it('reads back what it wrote', () => {
    expect(parseSet(JSON.stringify(toWire(set)))).toEqual(set);
    const bare = {
      ...set,
      refreshToken: undefined,
      lifetimeSeconds: 0,
      grant: 'client_credentials' as const,
    };
    expect(parseSet(JSON.stringify(toWire(bare)))).toEqual(bare);
  });

  it('nothing, or text that is not JSON, is no set', () => {
    expect(parseSet(undefined)).toBeUndefined();
    expect(parseSet('')).toBeUndefined();
    expect(parseSet('{"a":')).toBeUndefined();
  });

  it('JSON that is no object (null, a number, a list) is no set, and does not throw', () => {
    for (const text of ['null', '5', '"a"', '[]', 'true']) expect(parseSet(text)).toBeUndefined();
  });

  it.each([
    ['no access token', { a: undefined }],
    ['an empty access token', { a: '' }],
    ['a numeric access token', { a: 1 }],
    ['a refresh token that is no string', { r: null }],
    ['no send time', { s: undefined }],
    ['a send time as text', { s: String(T0) }],
    ['a send time as null', { s: null }],
    ['a negative lifetime', { l: -1 }],
    ['a lifetime as text', { l: '60' }],
    ['an unknown grant', { g: 'password' }],
  ])('%s: the whole set is unreadable', (_what, change) => {
    const text = JSON.stringify({ ...toWire(set), ...change });
    expect(parseSet(text)).toBeUndefined();
  });
});
