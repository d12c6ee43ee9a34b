/**
 * A store Lua script's shape (docs/token-store.md): its source and SHA-1, the store's clock as a
 * prelude, and the key naming that keeps one script's keys on one cluster node. The modules that
 * run scripts define them here; fleet/scripts.ts lists them all for the connection's client.
 */
import { createHash } from 'node:crypto';
import type { ClientScript } from './clients.js';

/**
 * A Lua script run atomically by the server. node-redis runs it (EVALSHA, EVAL when the server
 * does not know it yet) as a script registered with the client when the connection is made.
 */
export interface StoreScript extends ClientScript {
  readonly sha1: string;
}

/**
 * A script, named after its source (the same source always gets the same name): list it in
 * fleet/scripts.ts so the connection's client knows it. Scripts may read the store's clock, so
 * every process of a fleet agrees on "now": start with {@link STORE_NOW_MS_LUA} to get `now_ms`.
 * Keys the script touches must be passed in `keys`, all with one hash tag (a cluster runs a script
 * on the node of its first key).
 */
export function defineScript(lua: string): StoreScript {
  const sha1 = createHash('sha1').update(lua).digest('hex');
  return { lua, sha1, name: `oauthSidecar_${sha1.slice(0, 16)}` };
}

/**
 * `{name}` in a cluster: Redis hashes only the part in braces, so the keys one script touches
 * (named after the same `name`) land in one slot, and different names spread over the slots.
 * Standalone and Sentinel keys keep their plain names.
 */
export function hashTagged(name: string, hashTags: boolean): string {
  return hashTags ? `{${name}}` : name;
}

/**
 * Lua prelude: `local now_ms = <the store's clock in ms>`. Allowed before writes since Redis 5
 * (scripts replicate their effects, not themselves).
 */
export const STORE_NOW_MS_LUA =
  "local __t = redis.call('TIME')\nlocal now_ms = tonumber(__t[1]) * 1000 + math.floor(tonumber(__t[2]) / 1000)\n";
