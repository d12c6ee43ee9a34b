/**
 * The `store` settings (docs/configuration.md "Shared token store"): cross-key rules of the mode, the
 * URL's hosts and the Sentinel settings, and the config object that never shows a password.
 */
import { inspect } from 'node:util';
import { parseStoreUrl, redactStoreUrl } from '../store-url.js';
import { label, type FieldKey, type ResolvedValues } from './schema.js';
import type { Config } from './types.js';

type Get = <K extends FieldKey>(key: K) => ResolvedValues[K];

/** Every inconsistency between `store.mode`, the URL and the Sentinel settings, at once. */
export function checkStore(get: Get, invalid: ReadonlySet<FieldKey>, problems: string[]): void {
  if (invalid.has('store.mode')) return;
  const mode = get('store.mode');
  const url = get('store.url');
  const parsed = url === undefined || invalid.has('store.url') ? undefined : parseStoreUrl(url);
  const address = parsed === undefined || 'problem' in parsed ? undefined : parsed;
  const modeIs = `${label('store.mode')} is ${mode}`;
  if (mode !== 'standalone' && url === undefined && !invalid.has('store.url')) {
    problems.push(`${label('store.url')}: required with ${modeIs}`);
  }
  if (mode === 'standalone' && address !== undefined && address.nodes.length > 1) {
    problems.push(
      `${label('store.url')}: names ${address.nodes.length} hosts, but ${modeIs}: several hosts are the seed nodes of a cluster or the sentinels (set ${label('store.mode')} to cluster or sentinel)`,
    );
  }
  if (mode === 'cluster' && address?.db !== undefined) {
    problems.push(
      `${label('store.url')}: names database ${address.db}, but a Redis Cluster has only database 0 (${modeIs}); drop the /${address.db}`,
    );
  }
  const primary = get('store.sentinelPrimary');
  if (mode === 'sentinel' && primary === undefined && !invalid.has('store.sentinelPrimary')) {
    problems.push(`${label('store.sentinelPrimary')}: required with ${modeIs}`);
  }
  for (const key of ['store.sentinelPrimary', 'store.sentinelPassword'] as const) {
    if (mode !== 'sentinel' && get(key) !== undefined) {
      problems.push(
        `${label(key)}: only used with ${label('store.mode')} sentinel (it is ${mode})`,
      );
    }
  }
}

/** `store`: the URL and the sentinels' password are secrets, so serialising never shows them. */
export function storeConfig(get: Get): Config['store'] {
  const store: Config['store'] = {
    url: get('store.url'),
    mode: get('store.mode'),
    sentinelPrimary: get('store.sentinelPrimary'),
    sentinelPassword: get('store.sentinelPassword'),
    keyPrefix: get('store.keyPrefix'),
    healthCheckIntervalMs: get('store.healthCheckIntervalMs'),
  };
  const safe = (): object => ({
    ...store,
    url: store.url === undefined ? undefined : redactStoreUrl(store.url),
    sentinelPassword: store.sentinelPassword === undefined ? undefined : '(set)',
  });
  Object.defineProperty(store, 'toJSON', { value: safe, enumerable: false });
  Object.defineProperty(store, inspect.custom, { value: safe, enumerable: false });
  return store;
}
