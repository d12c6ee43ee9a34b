import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { FieldKey, ResolvedValues } from './schema.js';
import { checkStore, storeConfig } from './store-config.js';

const PASSWORD = 'store-pw-91c2';
const SENTINEL_PASSWORD = 'sentinel-pw-44ab';

type Values = Partial<{ [K in FieldKey]: ResolvedValues[K] }>;

/** A resolver over `values`, with the schema's defaults of the store keys. */
function getter(values: Values) {
  const all: Values = {
    'store.mode': 'standalone',
    'store.keyPrefix': 'oauth-sidecar:',
    ...values,
  };
  return <K extends FieldKey>(key: K): ResolvedValues[K] => all[key] as ResolvedValues[K];
}

function problemsOf(values: Values, invalid: FieldKey[] = []): string[] {
  const problems: string[] = [];
  checkStore(getter(values), new Set(invalid), problems);
  return problems;
}

describe('checkStore', () => {
  it('a standalone store with one host, or none at all, is fine', () => {
    expect(problemsOf({})).toEqual([]);
    expect(problemsOf({ 'store.url': 'redis://redis:6379/2' })).toEqual([]);
  });

  it('cluster and sentinel modes need a URL; sentinel needs its primary', () => {
    expect(problemsOf({ 'store.mode': 'cluster' })).toEqual([
      'STORE_URL (store.url): required with STORE_MODE (store.mode) is cluster',
    ]);
    expect(problemsOf({ 'store.mode': 'sentinel' })).toEqual([
      'STORE_URL (store.url): required with STORE_MODE (store.mode) is sentinel',
      'STORE_SENTINEL_PRIMARY (store.sentinelPrimary): required with STORE_MODE (store.mode) is sentinel',
    ]);
    expect(
      problemsOf({
        'store.mode': 'sentinel',
        'store.url': 'redis://s1:26379,s2:26379',
        'store.sentinelPrimary': 'mymaster',
      }),
    ).toEqual([]);
  });

  it('several hosts in standalone mode, or a database in a cluster, are problems', () => {
    expect(problemsOf({ 'store.url': `redis://u:${PASSWORD}@a:6379,b:6379` })).toEqual([
      expect.stringMatching(/^STORE_URL \(store\.url\): names 2 hosts, but STORE_MODE/),
    ]);
    const cluster = problemsOf({ 'store.mode': 'cluster', 'store.url': 'redis://a:6379,b:6379/3' });
    expect(cluster).toEqual([
      'STORE_URL (store.url): names database 3, but a Redis Cluster has only database 0 (STORE_MODE (store.mode) is cluster); drop the /3',
    ]);
  });

  it('the sentinel settings outside sentinel mode are problems, one each', () => {
    expect(
      problemsOf({
        'store.url': 'redis://a:6379',
        'store.sentinelPrimary': 'mymaster',
        'store.sentinelPassword': SENTINEL_PASSWORD,
      }),
    ).toEqual([
      'STORE_SENTINEL_PRIMARY (store.sentinelPrimary): only used with STORE_MODE (store.mode) sentinel (it is standalone)',
      'STORE_SENTINEL_PASSWORD (store.sentinelPassword): only used with STORE_MODE (store.mode) sentinel (it is standalone)',
    ]);
  });

  it('adds nothing about a key already reported invalid', () => {
    expect(problemsOf({ 'store.mode': 'cluster' }, ['store.url'])).toEqual([]);
    expect(
      problemsOf({ 'store.mode': 'sentinel', 'store.url': 'redis://s:1' }, [
        'store.sentinelPrimary',
      ]),
    ).toEqual([]);
    expect(problemsOf({ 'store.mode': 'cluster' }, ['store.mode'])).toEqual([]);
  });
});

describe('storeConfig', () => {
  it('holds the values, and neither JSON nor inspect shows a password', () => {
    const store = storeConfig(
      getter({
        'store.url': `rediss://user:${PASSWORD}@redis:6380/0`,
        'store.mode': 'sentinel',
        'store.sentinelPrimary': 'mymaster',
        'store.sentinelPassword': SENTINEL_PASSWORD,
      }),
    );
    expect(store.url).toBe(`rediss://user:${PASSWORD}@redis:6380/0`);
    expect(store.sentinelPassword).toBe(SENTINEL_PASSWORD);
    for (const shown of [JSON.stringify({ store }), inspect({ store }, { depth: 5 })]) {
      expect(shown).not.toContain(PASSWORD);
      expect(shown).not.toContain(SENTINEL_PASSWORD);
      expect(shown).toContain('mymaster');
      expect(shown).toContain('(set)');
    }
    expect(JSON.parse(JSON.stringify(store))).toMatchObject({
      url: expect.stringContaining('redis:6380'),
    });
  });
});
