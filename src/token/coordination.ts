/**
 * The contract between the token keeper and the shared token store's coordinator (shared.ts,
 * docs/token-store.md): what a grant may use, what comes back, and the coordinator's interface.
 */
import type { SharedTokenSet, TokenSetStore } from '../fleet/token-sets.js';
import type { Logger } from '../telemetry/logger.js';
import type { RenewalSettings } from './schedule.js';
import type { GrantType, TokenSet } from './types.js';

/** Which refresh token a grant may use: the fleet's (store up; none = client credentials) or its own. */
export type RefreshSource =
  { kind: 'shared'; refreshToken: string | undefined } | { kind: 'local' };

/** The keeper's outcome of one grant, as far as the coordinator needs it. */
export type GrantOutcome =
  | { ok: true; grant: GrantType; tokenSet: TokenSet; sentAt: number }
  | { ok: false; grant: GrantType; error: unknown };

export type Coordinated<O extends GrantOutcome> =
  /** Another process's token set, taken from the store: no grant was made. */
  | { kind: 'adopted'; tokenSet: SharedTokenSet; generation: number }
  /** This process ran the grant (under the lease, or alone while the store is down). */
  | { kind: 'granted'; outcome: O; refreshToken: string | undefined; shared: boolean }
  /** The lease holder went away without a new token (it died, or its grant failed): retry with backoff. */
  | { kind: 'lease-lost'; error: LeaseWaitError };

/** Another process's token set, taken from the store. */
export type Adopted = Extract<Coordinated<never>, { kind: 'adopted' }>;

/** What the keeper holds now, to tell a newer set in the store from its own. */
export interface HeldRef {
  accessToken: string;
  /** When it stops being valid (ms since the epoch): a wait for the lease holder ends there. */
  expiresAt?: number;
}

/** The lease holder left without publishing; the keeper retries with its backoff. */
export class LeaseWaitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LeaseWaitError';
  }
}

export interface StoreStatus {
  url: string;
  /** How the store is reached, and the node(s) in use (the server, the masters, the primary). */
  mode?: string;
  nodes?: string[];
  up: boolean;
  lastError: { message: string; at: string } | null;
  /** Generation of the shared entry this process last read or wrote; null before any. */
  generation: number | null;
}

export interface TokenCoordinatorOptions {
  store: TokenSetStore;
  /** The connection's health (URL without password, up, last error). */
  health(): {
    url: string;
    mode?: string;
    nodes?: string[];
    up: boolean;
    lastError: { message: string; at: string } | null;
  };
  settings: RenewalSettings & { timeoutMs: number };
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  logger: Logger;
}

export interface TokenCoordinator {
  /**
   * Obtain a token set for the fleet. `grant` is the keeper's own grant (never rejects); it is
   * called at most once. `rejectedToken`: the token an upstream 401 invalidated.
   */
  obtain<O extends GrantOutcome>(
    request: { held: HeldRef | undefined; rejectedToken?: string },
    grant: (source: RefreshSource) => Promise<O>,
  ): Promise<Coordinated<O>>;
  /**
   * One look at the store (no lease, no grant): a set another process published that this one
   * could adopt now, or undefined. For a process waiting out a retry (docs/token-store.md "A
   * process in backoff"). Store errors reject.
   */
  peek(request: {
    held: HeldRef | undefined;
    rejectedToken?: string;
  }): Promise<Adopted | undefined>;
  status(): StoreStatus;
}
