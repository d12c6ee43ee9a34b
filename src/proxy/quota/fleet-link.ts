/**
 * The guard's side of the fleet store: whether decisions are fleet-wide (the store's one health,
 * fleet/ports.ts), the background read of the fleet cooldown, and publishing one taken here.
 * A failed call needs no handling of its own: the connection marked the store down, and the
 * guard decides alone until a later call (the poll, every `pollMs`) finds it up.
 */
import type { Clock, TimerHandle } from '../../clock.js';
import type { CooldownStatus, SharedCooldown, SharedQuota } from '../../fleet/ports.js';

/** How often the fleet cooldown is read (docs/quota-guard.md: applies within 0.5 s). */
export const SHARED_POLL_MS = 250;

export class FleetLink {
  #pollTimer: TimerHandle | undefined;
  #polling = false;
  #closed = false;

  constructor(
    readonly shared: SharedQuota,
    private readonly clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
    private readonly pollMs: number,
    /** A cooldown read from the store. */
    private readonly onCooldown: (cooldown: SharedCooldown) => void,
  ) {}

  /** Fleet-wide while the store is up, or while its first connection is still being made. */
  active(): boolean {
    const health = this.shared.health();
    return health.up || health.connecting;
  }

  /** Why the store is not used now, for `/status`; null while it is. */
  error(): string | null {
    return this.active() ? null : (this.shared.health().lastError?.message ?? null);
  }

  start(): void {
    if (this.#pollTimer !== undefined || this.#closed) return;
    this.#schedule();
  }

  close(): void {
    this.#closed = true;
    if (this.#pollTimer !== undefined) this.clock.clearTimeout(this.#pollTimer);
    this.#pollTimer = undefined;
  }

  publish(status: CooldownStatus, ms: number): void {
    if (this.active()) this.shared.startCooldown(status, ms).catch(() => undefined);
  }

  #schedule(): void {
    const timer = this.clock.setTimeout(() => this.#poll(), this.pollMs);
    timer.unref?.();
    this.#pollTimer = timer;
  }

  /** One taken by another process applies here within one poll. */
  #poll(): void {
    this.#pollTimer = undefined;
    if (this.#closed || this.#polling) return;
    this.#polling = true;
    this.shared.readCooldown().then(
      (cooldown) => {
        this.#polling = false;
        if (cooldown !== undefined && cooldown.msLeft > 0) this.onCooldown(cooldown);
        if (!this.#closed) this.#schedule();
      },
      () => {
        this.#polling = false;
        if (!this.#closed) this.#schedule();
      },
    );
  }
}
