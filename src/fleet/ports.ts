/**
 * What the rest of the sidecar sees of the fleet store: types only, no Redis, so proxy/ and token/
 * import them and the store's side implements them (fleet/quota.ts, fleet/connection.ts).
 */
import type { StoreScript } from './lua.js';

/** What the rest of the sidecar sees of Redis. */
export interface StoreConnection {
  /**
   * Run `script` atomically. Settles within `commandTimeoutMs`; rejects with StoreError when the
   * store is down, slow, or answers an error. Lua tables come back as arrays, nil as null.
   * `onLateReply`: the call was given up (timed out) but the server ran the script after all; it
   * gets the reply then, so the caller can undo what it can no longer use (a lease it took).
   */
  runScript(
    script: StoreScript,
    keys: readonly string[],
    args: readonly string[],
    onLateReply?: (reply: unknown) => void,
  ): Promise<unknown>;
  /** PING now and return the server's version (for `check`); rejects with StoreError. */
  probe(): Promise<string>;
  health(): StoreHealth;
  close(): Promise<void>;
  /** Redis Cluster: the keys one script touches must share a hash tag (fleet/scripts.ts). */
  readonly hashTags?: boolean;
}

/** The store's one view of its health: the connection's (the only timeout, the only `up`). */
export interface StoreHealth {
  /** The configured URL without its password. */
  url: string;
  /** How the store is reached (docs/token-store.md "Redis Cluster and Sentinel"). */
  mode: 'standalone' | 'cluster' | 'sentinel';
  /** `host:port` of the node(s) in use: the server, the cluster's masters, the current primary. */
  nodes: string[];
  up: boolean;
  /** The first connection attempt has not settled yet: callers wait for it rather than act alone. */
  connecting: boolean;
  lastError: { message: string; at: string } | null;
  /** `redis_version` from the server, once known. */
  serverVersion: string | null;
}

/** The statuses that start a cooldown (with `Retry-After`). */
export type CooldownStatus = 429 | 503;

/** A fleet cooldown as the store reports it: time left is measured on the store's clock. */
export interface SharedCooldown {
  status: CooldownStatus;
  msLeft: number;
}

/** What one caller of this process asks the fleet for: `want` slots, with its weight and priority. */
export interface CallerDemand {
  caller: string;
  weight: number;
  priority: 'interactive' | 'batch';
  want: number;
  /**
   * Extra slots for this member's leased batch (docs/capacity.md "Leased batches"): granted only
   * from a plentiful bucket and while nobody else's caller comes first; 0 or absent: none.
   */
  lease?: number;
}

/** One fleet-wide rate-limit decision (one atomic script in the store). */
export interface SharedDecision {
  /** Slots granted in all, 0..sum of wants. None while a cooldown is in force. */
  granted: number;
  /** Slots granted to each demand, in the order asked: its `want` first, then its `lease`. */
  grants: number[];
  /** Milliseconds until the fleet bucket has its next slot (0 when slots are left). */
  waitMs: number;
  /** Slots left in the fleet bucket after this decision (fractional: one partly refilled). */
  tokens: number;
  cooldown: SharedCooldown | undefined;
}

/**
 * The fleet-wide half of the quota guard. Every call settles within the connection's timeout and
 * rejects when the store is unreachable, slow or answers an error; the guard then limits alone.
 */
export interface SharedQuota {
  /**
   * Take slots of the fleet bucket for the callers asking, shared fairly with the rest of the
   * fleet's callers (and report a cooldown in force).
   */
  take(demands: readonly CallerDemand[]): Promise<SharedDecision>;
  /** Start (or extend) the fleet cooldown to `ms` from now on the store's clock. */
  startCooldown(status: CooldownStatus, ms: number): Promise<void>;
  /** The fleet cooldown in force, if any. */
  readCooldown(): Promise<SharedCooldown | undefined>;
  /** The store's health: the guard is fleet-wide while it is up (or still connecting). */
  health(): Pick<StoreHealth, 'up' | 'connecting' | 'lastError'>;
}

/** A cache entry as the fleet shares it, opened (docs/response-cache.md "Shared tier"). */
export interface SharedAnswer {
  /** Client-facing headers, as the local tier stores them. */
  headers: Record<string, string | string[]>;
  body: Buffer;
  /** Freshness and the stale windows (RFC 5861), in ms from when it was written. */
  freshMs: number;
  staleIfErrorMs: number;
  staleWhileRevalidateMs: number;
  /** The request fields its `Vary` names, and their values when it was fetched. */
  vary: string[];
  varyValues: (string | null)[];
}

/** One look at the store for a cache key. */
export interface SharedRead {
  /** Undefined: none, unreadable (another secret, corrupted, forged), or invalidated. */
  answer: SharedAnswer | undefined;
  /** Milliseconds since it was written, on the store's clock. */
  ageMs: number;
  /** The path's invalidation generation now: a fill writes its answer under it. */
  generation: string;
  /**
   * The fill lease: `taken` (this process asks the API), `held` (another member does: wait for
   * the entry), `none` (not asked for, or the entry is fresh).
   */
  lease: 'taken' | 'held' | 'none';
}

/**
 * The response cache's shared tier. Every call settles within the connection's timeout and
 * rejects when the store is unreachable, slow, full or answers an error: the cache then works
 * from its local tier and the API alone.
 */
export interface SharedCacheEntries {
  /** Read `key`; with `takeLease`, take its fill lease unless its entry is fresh. */
  read(key: string, path: string, takeLease: boolean): Promise<SharedRead>;
  /** Write `answer` (and give the lease back) unless `path` was invalidated since `generation`. */
  write(key: string, path: string, answer: SharedAnswer, generation: string): Promise<void>;
  /** Give the fill lease back (the fill failed or stored nothing). */
  release(key: string): Promise<void>;
  /** Extend this process's fill lease by its TTL. False: it is no longer this process's. */
  renew(key: string): Promise<boolean>;
  /** The fill lease's TTL: a holder renews it well within this while its fill makes progress. */
  readonly leaseTtlMs: number;
  /** Every entry of `path`, whatever its query and variants, reads as a miss from now on. */
  invalidate(path: string): Promise<void>;
  health(): Pick<StoreHealth, 'up' | 'connecting'>;
}
