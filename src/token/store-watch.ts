/**
 * With a shared store, a process waiting out a backoff would otherwise serve 503 until its own
 * retry although another process has published a new token meanwhile. So while the retry waits
 * and no valid token is held, it looks at the store every {@link LEASE_POLL_MS} (one read, no
 * lease) and adopts a set it finds; while the held token is still valid, the first look is at its
 * expiry. Bounded: one read at a time, only between a failure and the next attempt; a store error
 * ends the watch until the next failure (the retry then decides, as without a store).
 */
import { setLongTimeout, type Clock, type LongTimer } from '../clock.js';
import { errorText } from '../errors.js';
import type { SharedTokenSet } from '../fleet/token-sets.js';
import type { Logger } from '../telemetry/logger.js';
import type { FailureRecord } from './failures.js';
import type { HeldRef, TokenCoordinator } from './coordination.js';
import { LEASE_POLL_MS } from './shared.js';

export interface StoreWatchDeps {
  coordinator: TokenCoordinator;
  clock: Clock;
  log: Logger;
  held(): HeldRef | undefined;
  rejectedToken(): string | undefined;
  /** Nothing happened since `failure` (no attempt started, no other outcome, not stopped). */
  stillWaiting(failure: FailureRecord): boolean;
  adopt(tokenSet: SharedTokenSet, generation: number): void;
}

export class StoreWatch {
  #timer: LongTimer | undefined;

  constructor(private readonly deps: StoreWatchDeps) {}

  /** Look at the store after `failure`, at the held token's expiry or after one poll interval. */
  start(failure: FailureRecord): void {
    this.clear();
    const { clock } = this.deps;
    const now = clock.now();
    const validUntil = this.deps.held()?.expiresAt ?? now;
    const delay = validUntil > now ? validUntil - now : LEASE_POLL_MS;
    this.#timer = setLongTimeout(
      clock,
      () => {
        this.#timer = undefined;
        void this.#look(failure);
      },
      delay,
    );
  }

  clear(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  async #look(failure: FailureRecord): Promise<void> {
    const { deps } = this;
    let found: Awaited<ReturnType<TokenCoordinator['peek']>>;
    try {
      found = await deps.coordinator.peek({
        held: deps.held(),
        rejectedToken: deps.rejectedToken(),
      });
    } catch (error) {
      deps.log.debug(
        { event: 'store', error: errorText(error) },
        'store unreadable while waiting to retry; the retry decides',
      );
      return;
    }
    if (!deps.stillWaiting(failure)) return;
    if (found === undefined) this.start(failure);
    else deps.adopt(found.tokenSet, found.generation);
  }
}
