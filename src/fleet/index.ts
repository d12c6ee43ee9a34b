/**
 * The shared store's entry point for the composition root. `main.ts` imports this module only when
 * `token.store.url` is set, so a sidecar without a store never loads the Redis client.
 */
export {
  createStoreConnection,
  defineScript,
  redactStoreUrl,
  STORE_NOW_MS_LUA,
  type StoreConnection,
  type StoreHealth,
  type StoreScript,
} from './connection.js';
export { createTokenSetStore, type TokenSetStore } from './token-sets.js';
