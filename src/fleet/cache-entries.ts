/**
 * The response cache's shared tier in the store (docs/response-cache.md "Shared tier"): sealed
 * entries under hashed names, a fill lease per key, and a generation per path that invalidation
 * bumps. Each decision is one atomic script; what a read finds is checked before it is believed
 * (docs/token-store.md "What the store says is never trusted").
 */
import { randomUUID } from 'node:crypto';
import { CacheNaming, HeldLeases } from './cache-names.js';
import { defineScript, type StoreConnection } from './connection.js';
import {
  IdentityKeys,
  deriveCacheKeys,
  seal,
  unsealParts,
  type CacheKeys,
  type IdentityReader,
} from './crypto.js';
import type { SharedAnswer, SharedCacheEntries, SharedRead } from './ports.js';
import { TYPED_READS_LUA } from './typed-reads.js';

const FORMAT = 'c1';
/** Longest a path's generation is kept: longer than any entry lives (a day of TTL + a week stale). */
const GENERATION_TTL_MS = 8 * 86_400_000;
/**
 * Clocks of a fleet may differ by this much. An entry written (by the writer's clock) longer ago
 * than its lifetime plus this is an old value put back (a restored store): a miss.
 */
const CLOCK_SKEW_MS = 60_000;

/**
 * The fill lease's TTL. Its holder renews it while the fill makes progress, so a holder that dies
 * or stalls loses it within this (docs/response-cache.md "Shared tier").
 */
export const FILL_LEASE_TTL_MS = 3_000;
/** A lease's value is an owner's UUID: anything longer is not one. */
const MAX_OWNER_BYTES = 64;
/** Room for an entry's headers and `Vary` values beside its body, before sealing. */
const MAX_ENTRY_HEAD_BYTES = 128 * 1024;

/**
 * The longest sealed value an entry with a body of `maxBodyBytes` can be (base64url of body, head
 * and tag, plus the clear fields): a longer one is not read, and a member never writes one.
 */
export function maxSealedBytes(maxBodyBytes: number): number {
  return Math.ceil(((maxBodyBytes + MAX_ENTRY_HEAD_BYTES) * 4) / 3) + 256;
}

/**
 * Typed, bounded reads (typed-reads.ts), and `generation(key)`: a path's generation, '0' when
 * absent or not a number (a forged one reads as absent; the next invalidation replaces it).
 */
const CACHE_LUA =
  TYPED_READS_LUA +
  `
local function generation(key)
  local g = get_bounded(key, 20)
  if g and string.match(g, '^%d+$') then return g end
  return '0'
end
`;
const cacheScript = (lua: string) => defineScript(CACHE_LUA + lua);

/**
 * KEYS: entry, generation, lease. ARGV: owner, lease TTL (ms), '1' to take the lease, the
 * longest value. Returns {value or '', PTTL, generation, lease}. Freshness is judged from the
 * value's clear fields (bound to it by the seal) and the key's PTTL; a lease without expiry, or
 * longer than ours, is cut to ours: nobody holds a key for ever. A value too large or of another
 * type is a miss (the fill that follows replaces it); a lease key that is no lease is deleted.
 */
const READ = cacheScript(`
local v = get_bounded(KEYS[1], tonumber(ARGV[4]))
local ttl = redis.call('PTTL', KEYS[1])
local g = generation(KEYS[2])
local fresh = false
if v then
  local vg, f, l = string.match(v, '^${FORMAT}%.(%d+)%.(%d+)%.(%d+)%.')
  if vg == g and ttl > 0 and tonumber(l) >= ttl and tonumber(l) - ttl < tonumber(f) then
    fresh = true
  end
end
local lease = 'none'
if not fresh and ARGV[3] == '1' then
  local holder, forged = get_bounded(KEYS[3], ${MAX_OWNER_BYTES})
  if forged then redis.call('DEL', KEYS[3]) end
  if redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then
    lease = 'taken'
  elseif holder == ARGV[1] then
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
const WRITE = cacheScript(`
local written = 0
if generation(KEYS[2]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  written = 1
end
if get_bounded(KEYS[3], ${MAX_OWNER_BYTES}) == ARGV[4] then redis.call('DEL', KEYS[3]) end
return written
`);

/** KEYS: lease. ARGV: owner. Only one's own lease is given back. */
const RELEASE = cacheScript(`
if get_bounded(KEYS[1], ${MAX_OWNER_BYTES}) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`);

/** KEYS: lease. ARGV: owner, TTL (ms). 1: still ours, renewed; 0: lost. */
const RENEW = cacheScript(`
if get_bounded(KEYS[1], ${MAX_OWNER_BYTES}) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`);

/** KEYS: generation. ARGV: its TTL. A value that is not a number (forged) starts again at 1. */
const INVALIDATE = cacheScript(`
local g = tonumber(generation(KEYS[1]))
redis.call('SET', KEYS[1], string.format('%d', g + 1), 'PX', ARGV[1])
return 0
`);

/** This module's scripts, for fleet/scripts.ts. */
export const CACHE_SCRIPTS = [READ, WRITE, RELEASE, RENEW, INVALIDATE];

export interface StoreCacheOptions {
  connection: Pick<StoreConnection, 'runScript' | 'health' | 'hashTags'>;
  keyPrefix: string;
  tokenUrl: string;
  readIdentity: IdentityReader;
  /** `cache.maxSharedEntryBytes`: a value longer than such an entry sealed is not read. */
  maxEntryBytes: number;
  /** The fill lease's TTL (default {@link FILL_LEASE_TTL_MS}). */
  leaseTtlMs?: number;
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
  readonly #maxValueBytes: number;
  readonly leaseTtlMs: number;
  readonly #held = new HeldLeases();
  readonly #naming: CacheNaming;

  constructor(options: StoreCacheOptions) {
    this.#options = options;
    this.#maxValueBytes = maxSealedBytes(options.maxEntryBytes);
    this.leaseTtlMs = options.leaseTtlMs ?? FILL_LEASE_TTL_MS;
    this.#naming = new CacheNaming(options.keyPrefix, options.connection.hashTags === true);
    this.#keys = new IdentityKeys(options.readIdentity, options.now, ({ clientSecret }) =>
      deriveCacheKeys(clientSecret, options.tokenUrl),
    );
  }

  health(): ReturnType<SharedCacheEntries['health']> {
    return this.#options.connection.health();
  }

  async keysOf(key: string, path: string) {
    return this.#naming.names(await this.#keys.get(), key, path);
  }

  async read(key: string, path: string, takeLease: boolean): Promise<SharedRead> {
    const keys = await this.#keys.get();
    const names = this.#naming.names(keys, key, path);
    const reply = await this.#options.connection.runScript(
      READ,
      [names.entry, names.generation, names.lease],
      [this.#owner, String(this.leaseTtlMs), takeLease ? '1' : '0', String(this.#maxValueBytes)],
    );
    const [value, ttl, generation, lease] = Array.isArray(reply) ? (reply as unknown[]) : [];
    if (lease === 'taken') this.#held.hold(key, names.lease);
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
    const names = this.#naming.names(keys, key, path);
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
    if (clear.length + 1 + sealed.length > this.#maxValueBytes) {
      // No member would read it: it stays local, and the lease goes back.
      await this.release(key);
      return;
    }
    this.#held.forget(key);
    await this.#options.connection.runScript(
      WRITE,
      [names.entry, names.generation, names.lease],
      [`${clear}.${sealed}`, String(lifetime), generation, this.#owner],
    );
  }

  async release(key: string): Promise<void> {
    const lease = await this.#leaseName(key);
    this.#held.forget(key);
    if (lease === undefined) return;
    await this.#options.connection.runScript(RELEASE, [lease], [this.#owner]);
  }

  async renew(key: string): Promise<boolean> {
    const lease = await this.#leaseName(key);
    if (lease === undefined) return false;
    const reply = await this.#options.connection.runScript(
      RENEW,
      [lease],
      [this.#owner, String(this.leaseTtlMs)],
    );
    return reply === 1;
  }

  /**
   * The store key of `key`'s fill lease: the one this process took (a cluster's is named after
   * its path), else the standalone name; undefined in a cluster when this process holds none.
   */
  async #leaseName(key: string): Promise<string | undefined> {
    return this.#held.get(key) ?? this.#naming.plainLease(await this.#keys.get(), key);
  }

  async invalidate(path: string): Promise<void> {
    const keys = await this.#keys.get();
    await this.#options.connection.runScript(
      INVALIDATE,
      [this.#naming.generation(keys, path)],
      [String(GENERATION_TTL_MS)],
    );
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
    const plaintext = unsealParts(keys.seal, `${entry}\0${clear}`, fields[5]!, fields[6]!);
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
