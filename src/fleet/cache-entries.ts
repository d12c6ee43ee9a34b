/**
 * The response cache's shared tier in the store (docs/response-cache.md "Shared tier"): sealed
 * entries under hashed names, a fill lease per key, and a generation per path that invalidation
 * bumps. Each decision is one atomic script; what a read finds is checked before it is believed
 * (docs/token-store.md "What the store says is never trusted").
 */
import { randomUUID } from 'node:crypto';
import { defineScript, type StoreConnection } from './connection.js';
import {
  IdentityKeys,
  deriveCacheKeys,
  hashedName,
  seal,
  unseal,
  type CacheKeys,
  type IdentityReader,
} from './crypto.js';
import type { SharedAnswer, SharedCacheEntries, SharedRead } from './ports.js';

const FORMAT = 'c1';
/** Longest a path's generation is kept: longer than any entry lives (a day of TTL + a week stale). */
const GENERATION_TTL_MS = 8 * 86_400_000;
/**
 * Clocks of a fleet may differ by this much. An entry written (by the writer's clock) longer ago
 * than its lifetime plus this is an old value put back (a restored store): a miss.
 */
const CLOCK_SKEW_MS = 60_000;

/**
 * KEYS: entry, generation, lease. ARGV: owner, lease TTL (ms), '1' to take the lease. Returns
 * {value or '', PTTL, generation, lease}. Freshness is judged from the value's clear fields
 * (bound to it by the seal) and the key's PTTL; a lease without expiry, or longer than ours, is
 * cut to ours: nobody holds a key for ever.
 */
const READ = defineScript(`
local v = redis.call('GET', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
local g = redis.call('GET', KEYS[2]) or '0'
local fresh = false
if v then
  local vg, f, l = string.match(v, '^${FORMAT}%.(%d+)%.(%d+)%.(%d+)%.')
  if vg == g and ttl > 0 and tonumber(l) >= ttl and tonumber(l) - ttl < tonumber(f) then
    fresh = true
  end
end
local lease = 'none'
if not fresh and ARGV[3] == '1' then
  if redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then
    lease = 'taken'
  elseif redis.call('GET', KEYS[3]) == ARGV[1] then
    lease = 'taken'
  else
    local lt = redis.call('PTTL', KEYS[3])
    if lt < 0 or lt > tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[3], ARGV[2]) end
    lease = 'held'
  end
end
return { v or '', ttl, g, lease }
`);

/** KEYS: entry, generation, lease. ARGV: value, PX, generation seen, owner. 1: written. */
const WRITE = defineScript(`
local written = 0
if (redis.call('GET', KEYS[2]) or '0') == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  written = 1
end
if redis.call('GET', KEYS[3]) == ARGV[4] then redis.call('DEL', KEYS[3]) end
return written
`);

/** KEYS: lease. ARGV: owner. Only one's own lease is given back. */
const RELEASE = defineScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`);

/** KEYS: generation. ARGV: its TTL. A value that is not a number (forged) starts again at 1. */
const INVALIDATE = defineScript(`
local g = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
redis.call('SET', KEYS[1], string.format('%d', g + 1), 'PX', ARGV[1])
return 0
`);

export interface StoreCacheOptions {
  connection: Pick<StoreConnection, 'runScript' | 'health'>;
  keyPrefix: string;
  tokenUrl: string;
  readIdentity: IdentityReader;
  /** How long a fill may take (`upstream.timeoutMs` + `upstream.bodyTimeoutMs`): the lease's TTL. */
  leaseTtlMs: number;
  now: () => number;
}

export interface StoreCache extends SharedCacheEntries {
  /** The store keys of a cache key and its path, for tests: entry, generation, lease. */
  keysOf(key: string, path: string): Promise<{ entry: string; generation: string; lease: string }>;
}

interface Payload {
  h: Record<string, string | string[]>;
  v: string[];
  vv: (string | null)[];
  e: number;
  w: number;
}

export function createStoreCache(options: StoreCacheOptions): StoreCache {
  return new StoreCacheEntries(options);
}

class StoreCacheEntries implements StoreCache {
  readonly #options: StoreCacheOptions;
  readonly #keys: IdentityKeys<CacheKeys>;
  /** This process's name on the leases it takes. */
  readonly #owner = randomUUID();

  constructor(options: StoreCacheOptions) {
    this.#options = options;
    this.#keys = new IdentityKeys(options.readIdentity, options.now, ({ clientSecret }) =>
      deriveCacheKeys(clientSecret, options.tokenUrl),
    );
  }

  health(): ReturnType<SharedCacheEntries['health']> {
    return this.#options.connection.health();
  }

  async keysOf(key: string, path: string) {
    return this.#names(await this.#keys.get(), key, path);
  }

  async read(key: string, path: string, takeLease: boolean): Promise<SharedRead> {
    const keys = await this.#keys.get();
    const names = this.#names(keys, key, path);
    const reply = await this.#options.connection.runScript(
      READ,
      [names.entry, names.generation, names.lease],
      [this.#owner, String(this.#options.leaseTtlMs), takeLease ? '1' : '0'],
    );
    const [value, ttl, generation, lease] = Array.isArray(reply) ? (reply as unknown[]) : [];
    const read: SharedRead = {
      answer: undefined,
      ageMs: 0,
      generation: typeof generation === 'string' ? generation : '0',
      lease: lease === 'taken' || lease === 'held' ? lease : 'none',
    };
    if (typeof value !== 'string' || value === '' || typeof ttl !== 'number') return read;
    const opened = this.#open(keys, names.entry, value, ttl, read.generation);
    if (opened !== undefined) Object.assign(read, opened);
    return read;
  }

  async write(key: string, path: string, answer: SharedAnswer, generation: string): Promise<void> {
    const keys = await this.#keys.get();
    const names = this.#names(keys, key, path);
    const lifetime =
      answer.freshMs + Math.max(answer.staleIfErrorMs, answer.staleWhileRevalidateMs);
    const clear = `${FORMAT}.${generation}.${answer.freshMs}.${lifetime}.${this.#options.now()}`;
    const payload: Payload = {
      h: answer.headers,
      v: answer.vary,
      vv: answer.varyValues,
      e: answer.staleIfErrorMs,
      w: answer.staleWhileRevalidateMs,
    };
    const plaintext = Buffer.concat([Buffer.from(`${JSON.stringify(payload)}\n`), answer.body]);
    const sealed = seal(keys.seal, `${names.entry}\0${clear}`, plaintext);
    await this.#options.connection.runScript(
      WRITE,
      [names.entry, names.generation, names.lease],
      [`${clear}.${sealed}`, String(lifetime), generation, this.#owner],
    );
  }

  async release(key: string): Promise<void> {
    const keys = await this.#keys.get();
    await this.#options.connection.runScript(
      RELEASE,
      [this.#named('cache-lease', hashedName(keys, key))],
      [this.#owner],
    );
  }

  async invalidate(path: string): Promise<void> {
    const keys = await this.#keys.get();
    await this.#options.connection.runScript(
      INVALIDATE,
      [this.#named('cache-gen', hashedName(keys, path))],
      [String(GENERATION_TTL_MS)],
    );
  }

  #names(keys: CacheKeys, key: string, path: string) {
    const name = hashedName(keys, key);
    return {
      entry: this.#named('cache', name),
      lease: this.#named('cache-lease', name),
      generation: this.#named('cache-gen', hashedName(keys, path)),
    };
  }

  /** A store key: the prefix, its kind, and a hashed name (of a cache key or a path). */
  #named(kind: 'cache' | 'cache-lease' | 'cache-gen', name: string): string {
    return `${this.#options.keyPrefix}${kind}:${name}`;
  }

  /**
   * The entry, if it opens and makes sense: its generation is the path's, its key's expiry is
   * within its lifetime (a key without one, or a longer one, was not written by a member), and
   * its writer's time is not older than its lifetime (an old value put back).
   */
  #open(
    keys: CacheKeys,
    entry: string,
    value: string,
    ttl: number,
    generation: string,
  ): Pick<SharedRead, 'answer' | 'ageMs'> | undefined {
    const fields = value.split('.');
    if (fields.length !== 7 || fields[0] !== FORMAT || fields[1] !== generation) return undefined;
    const [freshMs, lifetime, writtenAt] = fields.slice(2, 5).map(Number) as [
      number,
      number,
      number,
    ];
    if (![freshMs, lifetime, writtenAt].every(Number.isSafeInteger)) return undefined;
    if (ttl <= 0 || ttl > lifetime) return undefined;
    if (writtenAt + lifetime + CLOCK_SKEW_MS < this.#options.now()) return undefined;
    const clear = fields.slice(0, 5).join('.');
    const plaintext = unseal(keys.seal, `${entry}\0${clear}`, `${fields[5]}.${fields[6]}`);
    if (plaintext === undefined) return undefined;
    const split = plaintext.indexOf(10);
    if (split === -1) return undefined;
    let payload: Payload;
    try {
      payload = JSON.parse(plaintext.subarray(0, split).toString('utf8')) as Payload;
    } catch {
      return undefined;
    }
    return {
      ageMs: lifetime - ttl,
      answer: {
        headers: payload.h,
        body: plaintext.subarray(split + 1),
        freshMs,
        staleIfErrorMs: payload.e,
        staleWhileRevalidateMs: payload.w,
        vary: payload.v,
        varyValues: payload.vv,
      },
    };
  }
}
