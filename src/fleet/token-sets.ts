/**
 * The token-set entry and its renewal lease (docs/token-store.md). Each decision that
 * needs the store is one atomic script (docs/design.md "Practices"): take the lease and read the entry; write only
 * while holding the lease, with a generation that only grows; release only one's own lease;
 * delete the entry only while it still holds the token that got a 401.
 */
import { randomUUID } from 'node:crypto';
import { defineScript, type StoreConnection } from './connection.js';
import {
  IdentityKeys,
  type IdentityReader,
  deriveEntryKeys,
  openValue,
  sealValue,
  tokenFingerprint,
  type EntryKeys,
} from './crypto.js';
import { parseSet, toWire, type SharedTokenSet } from './token-set-wire.js';
import { TYPED_READS_LUA } from './typed-reads.js';

export type { SharedTokenSet } from './token-set-wire.js';

export interface StoredEntry {
  /** 0 when the entry has never been written (or expired). */
  generation: number;
  /** Its refresh token was already presented by some lease holder: never present it again. */
  refreshSpent?: boolean;
  /** Absent, deleted after a 401, or unreadable. */
  tokenSet: SharedTokenSet | undefined;
  /** Present but sealed under another secret or corrupted: treated as absent. */
  unreadable: boolean;
}

export interface Lease {
  readonly owner: string;
  readonly keys: EntryKeys;
}

/** Credentials the entry's name and keys derive from (re-read, so a rotated secret applies). */
export type { IdentityReader } from './crypto.js';

/** What the token keeper's coordinator uses. Every method rejects with StoreError when the store fails. */
export interface TokenSetStore {
  /** The entry, and whether some process holds the lease right now. */
  read(): Promise<{ entry: StoredEntry; leaseHeld: boolean }>;
  /** `SET NX PX` the lease with a random owner; the entry as it is at that moment either way. */
  takeLease(ttlMs: number): Promise<{ lease: Lease | undefined; entry: StoredEntry }>;
  /**
   * Write the set as generation `knownGeneration + 1` only while `lease` is still held and the store
   * holds no newer one, then release the lease. Undefined: the lease was lost (or a newer entry).
   */
  publish(
    lease: Lease,
    tokenSet: SharedTokenSet,
    knownGeneration: number,
  ): Promise<number | undefined>;
  /** Compare-and-delete the lease. */
  release(lease: Lease): Promise<void>;
  /**
   * Mark the refresh token of `generation` as presented, only while `lease` is held and the entry
   * is still that generation. False: do not present it (lease lost, entry changed, or already
   * marked by an earlier holder whose answer never arrived). Single use, fleet-wide.
   */
  spendRefresh(lease: Lease, generation: number): Promise<boolean>;
  /**
   * Delete the entry's token set only if it is still `accessToken` (the one that got a 401);
   * otherwise return the entry as it is (possibly a newer token to adopt).
   */
  deleteIfCurrent(accessToken: string): Promise<{ deleted: boolean; entry: StoredEntry }>;
}

/** How long an entry outlives its token: keeps the generation across a short gap between tokens. */
export const ENTRY_GRACE_MS = 3_600_000;

/**
 * The longest field a token-set entry holds (the sealed set): anything longer is not read
 * (docs/token-store.md "What the store says is never trusted").
 */
export const MAX_TOKEN_FIELD_BYTES = 64 * 1024;
/** A lease's value is an owner's UUID: anything longer is not one. */
const MAX_OWNER_BYTES = 64;

/**
 * Lua: typed, bounded reads (typed-reads.ts), `fields(key, names)` of the entry, and
 * `cap_lease`: a lease found without an expiry, or with one longer than this reader's lease TTL (a
 * restore tool that drops TTLs, a member with a longer timeout), is given this reader's TTL: it
 * expires whatever the store holds. `owner(key)`: the lease's holder, false when none (or forged).
 */
const TOKEN_LUA =
  TYPED_READS_LUA +
  `
local function cap_lease(key, ttl)
  local left = redis.call('PTTL', key)
  if left == -1 or left > ttl then redis.call('PEXPIRE', key, ttl) end
end
local function fields(key, names) return hmget_bounded(key, ${MAX_TOKEN_FIELD_BYTES}, names) end
local function owner(key) return (get_bounded(key, ${MAX_OWNER_BYTES})) end
`;
const tokenScript = (lua: string) => defineScript(TOKEN_LUA + lua);

/** KEYS: entry, lease. ARGV: lease TTL (ms). */
const READ = tokenScript(`
cap_lease(KEYS[2], tonumber(ARGV[1]))
local v = fields(KEYS[1], {'gen', 'data'})
return {v[1], v[2], redis.call('EXISTS', KEYS[2])}
`);

/** A lease key that is no lease (another type) is replaced. */
const TAKE_LEASE = tokenScript(`
string_or_none(KEYS[2])
cap_lease(KEYS[2], tonumber(ARGV[2]))
local got = redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2])
local v = fields(KEYS[1], {'gen', 'data', 'spent'})
local spent = 0
if v[3] and v[1] and v[3] == v[1] then spent = 1 end
if got then return {v[1], v[2], 1, spent} end
return {v[1], v[2], 0, spent}
`);

// Compare-and-set: only the lease holder writes, and only a generation above the stored one (the
// fencing number of docs/design.md "Practices"). The writer chooses the generation (max of what it
// has seen and what is stored, plus one) because it is sealed into the value's associated data.
// An entry key of another type is replaced.
// -1: the lease is not ours; -2: the store holds this generation or a newer one.
const PUBLISH = tokenScript(`
if owner(KEYS[2]) ~= ARGV[1] then return -1 end
hash_or_none(KEYS[1])
local g = tonumber(fields(KEYS[1], {'gen'})[1] or '0') or 0
local new = tonumber(ARGV[2])
if g >= new then return -2 end
redis.call('HSET', KEYS[1], 'gen', ARGV[2], 'fp', ARGV[3], 'data', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('DEL', KEYS[2])
return new
`);

/** KEYS: entry, lease. ARGV: owner, generation. 1: marked now; 0: do not present. */
const SPEND_REFRESH = tokenScript(`
if owner(KEYS[2]) ~= ARGV[1] then return 0 end
local v = fields(KEYS[1], {'gen', 'spent'})
if v[1] ~= ARGV[2] or v[2] == ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'spent', ARGV[2])
return 1
`);

const RELEASE = tokenScript(`
if owner(KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);

const DELETE_IF_CURRENT = tokenScript(`
local v = fields(KEYS[1], {'gen', 'fp', 'data'})
if v[2] and v[2] == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'fp', 'data')
  return {v[1], false, 1}
end
return {v[1], v[3], 0}
`);

/** This module's scripts, for fleet/scripts.ts. */
export const TOKEN_SCRIPTS = [READ, TAKE_LEASE, PUBLISH, SPEND_REFRESH, RELEASE, DELETE_IF_CURRENT];

export interface TokenSetStoreOptions {
  connection: StoreConnection;
  /** This reader's lease TTL: a lease in the store without an expiry, or a longer one, gets it. */
  leaseTtlMs: number;
  keyPrefix: string;
  tokenUrl: string;
  scopes: readonly string[];
  readIdentity: IdentityReader;
  now: () => number;
}

/** Names and keys from the current credentials (crypto.ts `IdentityKeys`). */
function entryKeysFor(options: TokenSetStoreOptions): IdentityKeys<EntryKeys> {
  return new IdentityKeys(options.readIdentity, options.now, ({ clientId, clientSecret }) =>
    deriveEntryKeys({
      keyPrefix: options.keyPrefix,
      // Redis Cluster: the keys of one entry share a hash tag.
      hashTags: options.connection.hashTags === true,
      tokenUrl: options.tokenUrl,
      clientId,
      clientSecret,
      scopes: options.scopes,
    }),
  );
}

/**
 * The one place a token-set script's reply is parsed. A generation that is not a safe
 * non-negative integer is absent (0); the value opens only under the generation stored beside it
 * (associated data), so a relabelled old entry is unreadable, never current.
 */
function decode(k: EntryKeys, reply: unknown): { entry: StoredEntry; flag: number } {
  const [gen, data, flag, spent] = Array.isArray(reply) ? (reply as unknown[]) : [];
  const generation = storedInteger(gen);
  let tokenSet: SharedTokenSet | undefined;
  let unreadable = false;
  if (typeof data === 'string' && data !== '') {
    tokenSet = parseSet(openValue(k, data, generation));
    unreadable = tokenSet === undefined;
  }
  const entry: StoredEntry = { generation, tokenSet, unreadable };
  if (storedInteger(spent) === 1) entry.refreshSpent = true;
  return { entry, flag: storedInteger(flag) };
}

/** The lease, if free; a lease granted after the call gave up (slow store) is given back. */
async function takeLease(
  connection: StoreConnection,
  k: EntryKeys,
  ttlMs: number,
): Promise<{ lease: Lease | undefined; entry: StoredEntry }> {
  const owner = randomUUID();
  const reply = await connection.runScript(
    TAKE_LEASE,
    [k.entry, k.lease],
    [owner, String(Math.ceil(ttlMs))],
    // Given up (slow store) but the script ran after all: this process renews without the
    // store now, so a lease it holds would only keep the fleet waiting one lease TTL.
    (late) => {
      if (decode(k, late).flag !== 1) return;
      connection.runScript(RELEASE, [k.lease], [owner]).catch(() => undefined);
    },
  );
  const { entry, flag } = decode(k, reply);
  return { lease: flag === 1 ? { owner, keys: k } : undefined, entry };
}

/** Publish `tokenSet` as the next generation under `lease`; its generation, or undefined. */
async function publish(
  connection: StoreConnection,
  lease: Lease,
  tokenSet: SharedTokenSet,
  knownGeneration: number,
  now: number,
): Promise<number | undefined> {
  const k = lease.keys;
  const expiresAt = tokenSet.sentAt + tokenSet.lifetimeSeconds * 1_000;
  const ttl = Math.max(1_000, expiresAt - now) + ENTRY_GRACE_MS;
  const generation = knownGeneration + 1;
  const reply = await connection.runScript(
    PUBLISH,
    [k.entry, k.lease],
    [
      lease.owner,
      String(generation),
      tokenFingerprint(k, tokenSet.accessToken),
      sealValue(k, JSON.stringify(toWire(tokenSet)), generation),
      String(Math.ceil(ttl)),
    ],
  );
  return storedInteger(reply) === generation ? generation : undefined;
}

export function createTokenSetStore(options: TokenSetStoreOptions): TokenSetStore {
  const { connection } = options;
  const leaseTtlMs = Math.ceil(options.leaseTtlMs);
  const cache = entryKeysFor(options);
  const keys = (): Promise<EntryKeys> => cache.get();

  return {
    async read() {
      const k = await keys();
      const { entry, flag } = decode(
        k,
        await connection.runScript(READ, [k.entry, k.lease], [String(leaseTtlMs)]),
      );
      return { entry, leaseHeld: flag === 1 };
    },
    async takeLease(ttlMs) {
      return takeLease(connection, await keys(), ttlMs);
    },
    async publish(lease, tokenSet, knownGeneration) {
      return publish(connection, lease, tokenSet, knownGeneration, options.now());
    },
    async spendRefresh(lease, generation) {
      const reply = await connection.runScript(
        SPEND_REFRESH,
        [lease.keys.entry, lease.keys.lease],
        [lease.owner, String(generation)],
      );
      return storedInteger(reply) === 1;
    },
    async release(lease) {
      await connection.runScript(RELEASE, [lease.keys.lease], [lease.owner]);
    },
    async deleteIfCurrent(accessToken) {
      const k = await keys();
      const reply = await connection.runScript(
        DELETE_IF_CURRENT,
        [k.entry],
        [tokenFingerprint(k, accessToken)],
      );
      const { entry, flag } = decode(k, reply);
      return { deleted: flag === 1, entry };
    },
  };
}

/** A safe non-negative integer from a script's reply (integer or bulk string), else 0 (absent). */
function storedInteger(value: unknown): number {
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'string' && /^[0-9]{1,16}$/.test(value)
        ? Number(value)
        : NaN;
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}
