/**
 * What the rest of the sidecar sees of the fleet store: types only, no Redis, so proxy/ and token/
 * import them and the store's side implements them (fleet/quota.ts, fleet/connection.ts).
 */

/** The store's one view of its health: the connection's (the only timeout, the only `up`). */
export interface StoreHealth {
  /** The configured URL without its password. */
  url: string;
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
}

/** One fleet-wide rate-limit decision (one atomic script in the store). */
export interface SharedDecision {
  /** Slots granted in all, 0..sum of wants. None while a cooldown is in force. */
  granted: number;
  /** Slots granted to each demand, in the order asked. */
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
