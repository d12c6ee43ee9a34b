/**
 * The store keys of the shared cache tier (fleet/cache-entries.ts): hashed names under the prefix,
 * and in a Redis Cluster one hash tag per path, so an entry, its fill lease and its path's
 * generation are on one node (one script) and different paths spread over the slots.
 */
import { hashedName, type CacheKeys } from './crypto.js';
import { hashTagged } from './lua.js';

/** Fill leases a process remembers the store key of (one per key being filled). */
const MAX_HELD_LEASES = 4_096;
/** Paths whose hashed name a process remembers (one HMAC fewer per read); then it starts again. */
const MAX_PATH_NAMES = 1_024;

export interface CacheNames {
  entry: string;
  lease: string;
  generation: string;
}

export class CacheNaming {
  /** Hashed, tagged path names under `#pathKeys` (other keys: a rotated secret starts again). */
  #pathNames = new Map<string, string>();
  #pathKeys: CacheKeys | undefined;

  constructor(
    private readonly keyPrefix: string,
    private readonly hashTags: boolean,
    private readonly maxPathNames = MAX_PATH_NAMES,
  ) {}

  /** Path names remembered, for tests. */
  get rememberedPaths(): number {
    return this.#pathNames.size;
  }

  /** The keys one read or write touches. Standalone: plain names; a cluster: `{path}:key`. */
  names(keys: CacheKeys, key: string, path: string): CacheNames {
    const name = hashedName(keys, key);
    const pathName = this.#pathName(keys, path);
    const keyed = this.hashTags ? `${pathName}:${name}` : name;
    return {
      entry: this.#named('cache', keyed),
      lease: this.#named('cache-lease', keyed),
      generation: this.#named('cache-gen', pathName),
    };
  }

  /** A path's generation key (what invalidation bumps). */
  generation(keys: CacheKeys, path: string): string {
    return this.#named('cache-gen', this.#pathName(keys, path));
  }

  /** A path's hashed name (hash-tagged in a cluster), remembered for the next read of it. */
  #pathName(keys: CacheKeys, path: string): string {
    if (this.#pathKeys !== keys || this.#pathNames.size >= this.maxPathNames) {
      this.#pathNames = new Map();
      this.#pathKeys = keys;
    }
    let name = this.#pathNames.get(path);
    if (name === undefined) {
      name = hashTagged(hashedName(keys, path), this.hashTags);
      this.#pathNames.set(path, name);
    }
    return name;
  }

  /** A key's fill lease by its name alone: only where it is not named after its path. */
  plainLease(keys: CacheKeys, key: string): string | undefined {
    return this.hashTags ? undefined : this.#named('cache-lease', hashedName(keys, key));
  }

  /** A store key: the prefix, its kind, and a hashed name (of a cache key or a path). */
  #named(kind: 'cache' | 'cache-lease' | 'cache-gen', name: string): string {
    return `${this.keyPrefix}${kind}:${name}`;
  }
}

/**
 * The store key of each fill lease this process holds, by cache key: in a cluster the lease is
 * named after its path too, which `release(key)` and `renew(key)` are not given. At most
 * {@link MAX_HELD_LEASES}, oldest forgotten: a lease forgotten here is given back by its TTL.
 */
export class HeldLeases {
  readonly #held = new Map<string, string>();

  constructor(private readonly max = MAX_HELD_LEASES) {}

  hold(key: string, lease: string): void {
    this.#held.delete(key);
    this.#held.set(key, lease);
    if (this.#held.size > this.max) this.#held.delete(this.#held.keys().next().value!);
  }

  get(key: string): string | undefined {
    return this.#held.get(key);
  }

  forget(key: string): void {
    this.#held.delete(key);
  }

  get size(): number {
    return this.#held.size;
  }
}
