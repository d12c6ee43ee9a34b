/**
 * Every Lua script of the store, in one list: the connection's client is built with these
 * (node-redis's `scripts` option), passed explicitly by whoever opens the connection. Nothing is
 * registered by importing a module, so no import order matters.
 */
import { CACHE_SCRIPTS } from './cache-entries.js';
import type { StoreScript } from './lua.js';
import { QUOTA_SCRIPTS } from './quota.js';
import { TOKEN_SCRIPTS } from './token-sets.js';

export const STORE_SCRIPTS: readonly StoreScript[] = [
  ...TOKEN_SCRIPTS,
  ...QUOTA_SCRIPTS,
  ...CACHE_SCRIPTS,
];
