/**
 * The fleet store's entry point: `sidecar.ts` and `check` import it only when `store.url` is set,
 * so a sidecar without a store never loads the Redis client.
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
export { STORE_SCRIPTS } from './scripts.js';
export { createTokenSetStore, type TokenSetStore } from './token-sets.js';
