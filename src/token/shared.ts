/**
 * The keeper's side of the shared token store (docs/token-store.md): wraps the keeper's
 * single grant point so that a fleet makes one grant per token lifetime. Before a grant it adopts a
 * fresher token set from the store, or takes the lease; only the lease holder calls the token
 * endpoint (and uses the shared refresh token) and publishes the result while it still holds the
 * lease. Others wait for the new generation. Any store failure: the grant runs as if there were no
 * store (docs/design.md "Practices"), and the next renewal tries the store again.
 */
import { StoreError } from '../errors.js';
import type { Lease, SharedTokenSet, StoredEntry, TokenSetStore } from '../fleet/token-sets.js';
import {
  LeaseWaitError,
  type Adopted,
  type Coordinated,
  type GrantOutcome,
  type HeldRef,
  type RefreshSource,
  type StoreStatus,
  type TokenCoordinator,
  type TokenCoordinatorOptions,
} from './coordination.js';
import { renewalTime } from './schedule.js';

/** How often a process waiting for the lease holder looks at the store. */
export const LEASE_POLL_MS = 100;
/** The lease outlives one token request by this much (docs/token-store.md: TTL = token.timeoutMs + 2 s). */
const LEASE_EXTRA_MS = 2_000;

/** The renewal lease's TTL for a token request bound of `tokenTimeoutMs`. */
export function leaseTtlMs(tokenTimeoutMs: number): number {
  return tokenTimeoutMs + LEASE_EXTRA_MS;
}

/** The keeper's view of the coordinator (coordination.ts), for the code that wires them. */
export type { TokenCoordinator } from './coordination.js';

export function createTokenCoordinator(options: TokenCoordinatorOptions): TokenCoordinator {
  return new Coordinator(options);
}

/** Newest refresh token after a successful grant (RFC 6749 §6: absent keeps the one used). */
function nextRefresh(outcome: GrantOutcome, used: string | undefined): string | undefined {
  if (!outcome.ok) return undefined;
  const received = outcome.tokenSet.refreshToken;
  if (typeof received === 'string') return received;
  if (received === null) return undefined;
  return outcome.grant === 'refresh_token' ? used : undefined;
}

async function local<O extends GrantOutcome>(
  grant: (source: RefreshSource) => Promise<O>,
): Promise<Coordinated<O>> {
  return {
    kind: 'granted',
    outcome: await grant({ kind: 'local' }),
    refreshToken: undefined,
    shared: false,
  };
}

class Coordinator implements TokenCoordinator {
  readonly #store: TokenSetStore;
  readonly #settings: TokenCoordinatorOptions['settings'];
  readonly #now: () => number;
  readonly #log: TokenCoordinatorOptions['logger'];
  readonly #leaseTtl: number;
  /** The newest generation seen: generations never go back. */
  #generation: number | null = null;

  constructor(private readonly options: TokenCoordinatorOptions) {
    this.#store = options.store;
    this.#settings = options.settings;
    this.#now = options.now;
    this.#log = options.logger;
    this.#leaseTtl = leaseTtlMs(options.settings.timeoutMs);
  }

  async obtain<O extends GrantOutcome>(
    request: { held: HeldRef | undefined; rejectedToken?: string },
    grant: (source: RefreshSource) => Promise<O>,
  ): Promise<Coordinated<O>> {
    const phase = { granting: false };
    try {
      return await this.#obtain(request.held, request.rejectedToken, grant, phase);
    } catch (error) {
      if (!(error instanceof StoreError) || phase.granting) throw error;
      return local(grant);
    }
  }

  async peek({ held, rejectedToken }: { held: HeldRef | undefined; rejectedToken?: string }) {
    return (await this.#look(held, rejectedToken)).fresh;
  }

  status(): StoreStatus {
    const health = this.options.health();
    return {
      url: health.url,
      ...(health.mode !== undefined && { mode: health.mode, nodes: health.nodes ?? [] }),
      up: health.up,
      lastError: health.lastError,
      generation: this.#generation,
    };
  }

  async #obtain<O extends GrantOutcome>(
    held: HeldRef | undefined,
    rejectedToken: string | undefined,
    grant: (source: RefreshSource) => Promise<O>,
    phase: { granting: boolean },
  ): Promise<Coordinated<O>> {
    const store = this.#store;
    if (rejectedToken !== undefined) {
      const { deleted, entry } = await store.deleteIfCurrent(rejectedToken);
      this.#seen(entry);
      const newer = deleted ? undefined : this.#adoptable(entry, held, rejectedToken);
      if (newer !== undefined) return this.#adopted(newer, entry);
    }
    const { lease, entry } = await store.takeLease(this.#leaseTtl);
    this.#seen(entry);
    const fresher = this.#adoptable(entry, held, rejectedToken);
    if (fresher !== undefined) {
      if (lease !== undefined) await store.release(lease);
      return this.#adopted(fresher, entry);
    }
    if (lease !== undefined) return this.#grantUnderLease(lease, entry, grant, phase);
    const waited = await this.#waitForHolder(held, rejectedToken);
    if (waited !== 'token-expiring') return waited;
    // The holder is late and this process's own token runs out now: renew without the store
    // rather than serve 503 for the rest of the lease. One extra grant at most.
    this.#log.warn(
      { event: 'store', lease: 'late' },
      'renewal lease holder has not published and the held token expires; renewing without the store',
    );
    return local(grant);
  }

  /**
   * The lease holder is the only process that calls the endpoint and uses the refresh token, and
   * only the refresh token of a current entry, marked spent in the store before it is presented
   * (an identity provider with reuse detection revokes the family on a replay).
   */
  async #grantUnderLease<O extends GrantOutcome>(
    lease: Lease,
    entry: StoredEntry,
    grant: (source: RefreshSource) => Promise<O>,
    phase: { granting: boolean },
  ): Promise<Coordinated<O>> {
    const used = await this.#spendable(lease, entry);
    this.#log.debug(
      { event: 'store', lease: 'taken', generation: entry.generation },
      'renewal lease taken',
    );
    phase.granting = true;
    const outcome = await grant({ kind: 'shared', refreshToken: used });
    const refreshToken = nextRefresh(outcome, used);
    if (!outcome.ok) {
      await this.#store.release(lease).catch(() => undefined);
      return { kind: 'granted', outcome, refreshToken, shared: true };
    }
    const { written, refused } = await this.#publish(lease, entry, outcome, refreshToken);
    if (written === undefined) {
      // Lease expired under us (a slow endpoint) or the store went away: keep the token locally;
      // the fleet converges at the next renewal.
      this.#log.warn(
        { event: 'store', published: false },
        'token obtained but not published (lease lost or store unavailable); using it locally',
      );
    } else {
      this.#generation = written;
    }
    // A published refresh token is the fleet's: no private copy (it would be presented on a
    // renewal without the store while the next holder presents it too).
    return {
      kind: 'granted',
      outcome,
      refreshToken: written === undefined && refused ? refreshToken : undefined,
      shared: true,
    };
  }

  async #publish(
    lease: Lease,
    entry: StoredEntry,
    outcome: Extract<GrantOutcome, { ok: true }>,
    refreshToken: string | undefined,
  ): Promise<{ written: number | undefined; refused: boolean }> {
    const set = {
      accessToken: outcome.tokenSet.accessToken,
      refreshToken,
      sentAt: outcome.sentAt,
      lifetimeSeconds: outcome.tokenSet.expiresInSeconds,
      grant: outcome.grant,
    };
    try {
      const written = await this.#store.publish(
        lease,
        set,
        Math.max(this.#generation ?? 0, entry.generation),
      );
      return { written, refused: written === undefined };
    } catch (error) {
      this.#log.debug(
        { event: 'store', error: describe(error) },
        'could not publish the token set',
      );
      return { written: undefined, refused: false };
    }
  }

  #seen(entry: StoredEntry): void {
    if (entry.generation > (this.#generation ?? 0)) this.#generation = entry.generation;
  }

  /**
   * A set worth taking instead of a grant: readable, not the one held or rejected, and not yet due
   * for renewal itself (its earliest jittered renewal time is still ahead).
   */
  #adoptable(
    entry: StoredEntry,
    held: HeldRef | undefined,
    rejected: string | undefined,
  ): SharedTokenSet | undefined {
    const set = entry.tokenSet;
    if (set === undefined) return undefined;
    // Generations never go back: an entry older than the newest seen is a restore or a replay.
    if (entry.generation < (this.#generation ?? 0)) return undefined;
    if (set.accessToken === held?.accessToken || set.accessToken === rejected) return undefined;
    const dueAt = renewalTime(set.sentAt, set.lifetimeSeconds, this.#settings, 1);
    return this.#now() < dueAt ? set : undefined;
  }

  #adopted(set: SharedTokenSet, entry: StoredEntry): Adopted {
    this.#seen(entry);
    return { kind: 'adopted', tokenSet: set, generation: entry.generation };
  }

  /** One read of the store (no lease): a set to adopt now, if any, and whether a lease is held. */
  async #look(held: HeldRef | undefined, rejected: string | undefined) {
    const { entry, leaseHeld } = await this.#store.read();
    this.#seen(entry);
    const set = this.#adoptable(entry, held, rejected);
    return { fresh: set === undefined ? undefined : this.#adopted(set, entry), leaseHeld };
  }

  /**
   * The refresh token a lease holder may present: the entry's, only if the entry is not older than
   * the newest generation seen, not already spent, and marked spent now. Otherwise none (client
   * credentials). Store errors propagate (the caller grants locally, without it).
   */
  async #spendable(lease: Lease, entry: StoredEntry): Promise<string | undefined> {
    const refreshToken = entry.tokenSet?.refreshToken;
    if (refreshToken === undefined) return undefined;
    if (entry.generation < (this.#generation ?? 0)) {
      this.#log.warn(
        { event: 'store', generation: entry.generation, newestSeen: this.#generation },
        'the store holds an older generation than this process has seen (restored or replayed); its refresh token is not used',
      );
      return undefined;
    }
    if (entry.refreshSpent === true) return undefined;
    return (await this.#store.spendRefresh(lease, entry.generation)) ? refreshToken : undefined;
  }

  /**
   * Another process holds the lease: wait for its new generation, at most one lease TTL (the lease
   * expires if the holder died), and never past the expiry of a token still valid when it starts
   * (`token-expiring`: the caller renews alone). Store errors propagate (the caller grants locally).
   */
  async #waitForHolder(
    held: HeldRef | undefined,
    rejected: string | undefined,
  ): Promise<Coordinated<never> | 'token-expiring'> {
    const now = this.#now;
    const deadline = now() + this.#leaseTtl + LEASE_POLL_MS;
    // Only a token still valid now bounds the wait: a process already without one (an endpoint
    // outage) waits for the fleet's one attempt as before instead of adding its own.
    const expiresAt = held?.expiresAt;
    const validUntil = expiresAt !== undefined && expiresAt > now() ? expiresAt : undefined;
    while (now() < deadline) {
      if (validUntil !== undefined && now() >= validUntil - LEASE_POLL_MS) return 'token-expiring';
      await this.options.sleep(LEASE_POLL_MS);
      const { fresh, leaseHeld } = await this.#look(held, rejected);
      if (fresh !== undefined) return fresh;
      if (!leaseHeld) break;
    }
    return {
      kind: 'lease-lost',
      error: new LeaseWaitError('the renewal lease holder left without publishing a new token'),
    };
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
