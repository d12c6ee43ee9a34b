import { describe, expect, it } from 'vitest';
import { CacheNaming, HeldLeases } from './cache-names.js';
import { deriveCacheKeys, deriveEntryKeys } from './crypto.js';

const keys = deriveCacheKeys('secret', 'https://idp.example/token');
/** The part of a key Redis Cluster hashes: the first `{…}`, else the whole key. */
const hashed = (key: string) => /\{([^}]+)\}/.exec(key)?.[1] ?? key;

describe('store key names', () => {
  it('standalone: the plain names; a cluster: an entry, its lease and its path generation share one hash tag', () => {
    const plain = new CacheNaming('p:', false).names(keys, 'GET /v1/a?x=1', '/v1/a');
    expect(Object.values(plain).join(' ')).not.toContain('{');
    expect(new CacheNaming('p:', false).plainLease(keys, 'GET /v1/a?x=1')).toBe(plain.lease);
    const naming = new CacheNaming('p:', true);
    const one = naming.names(keys, 'GET /v1/a?x=1', '/v1/a');
    const other = naming.names(keys, 'GET /v1/a?x=2', '/v1/a');
    const tags = new Set([one, other].flatMap((n) => Object.values(n).map(hashed)));
    expect(tags.size).toBe(1);
    expect(naming.generation(keys, '/v1/a')).toBe(one.generation);
    expect(hashed(naming.names(keys, 'GET /v1/b', '/v1/b').entry)).not.toBe(hashed(one.entry));
    expect(naming.plainLease(keys, 'GET /v1/a?x=1')).toBeUndefined();
  });

  it('remembers at most its bound of path names, and none across a rotated secret', () => {
    const naming = new CacheNaming('p:', true, 2);
    const fresh = (path: string, k = keys) => new CacheNaming('p:', true).generation(k, path);
    for (const path of ['/v1/a', '/v1/b', '/v1/c', '/v1/a']) {
      expect(naming.generation(keys, path)).toBe(fresh(path));
      expect(naming.rememberedPaths).toBeLessThanOrEqual(2);
    }
    const rotated = deriveCacheKeys('rotated', 'https://idp.example/token');
    expect(naming.generation(rotated, '/v1/a')).toBe(fresh('/v1/a', rotated));
    expect(naming.generation(rotated, '/v1/a')).not.toBe(fresh('/v1/a'));
    expect(naming.rememberedPaths).toBe(1);
  });

  it('a token set and its lease share one hash tag in a cluster, and other sets another', () => {
    const identity = {
      keyPrefix: 'p:',
      tokenUrl: 'https://idp.example/token',
      clientId: 'a',
      clientSecret: 's',
      scopes: ['read'],
    };
    const plain = deriveEntryKeys(identity);
    expect(plain.entry + plain.lease).not.toContain('{');
    const tagged = deriveEntryKeys({ ...identity, hashTags: true });
    expect(hashed(tagged.entry)).toBe(hashed(tagged.lease));
    const other = deriveEntryKeys({ ...identity, clientId: 'b', hashTags: true });
    expect(hashed(other.entry)).not.toBe(hashed(tagged.entry));
  });
});

describe('HeldLeases', () => {
  it('remembers at most its limit, forgetting the oldest', () => {
    const held = new HeldLeases(3);
    for (const key of ['a', 'b', 'c']) held.hold(key, `lease-${key}`);
    held.hold('a', 'lease-a2'); // held again: the newest
    held.hold('d', 'lease-d');
    expect(held.size).toBe(3);
    expect(held.get('b')).toBeUndefined();
    expect([held.get('a'), held.get('c'), held.get('d')]).toEqual([
      'lease-a2',
      'lease-c',
      'lease-d',
    ]);
    held.forget('c');
    expect(held.get('c')).toBeUndefined();
  });
});
