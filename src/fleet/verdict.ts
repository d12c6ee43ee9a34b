/**
 * The store's one verdict (docs/token-store.md "What happens when it fails"): `connecting` until
 * the store answers or the start wait is over, then `up` or `down`, changed and logged only when
 * it changes. A store that cannot be used at start is down like one lost later, whatever the
 * client goes on trying underneath; its line says so (`since: start`). Also what an error says for
 * the verdict: its one-line cause, and whether it is a refusal that settles it at once.
 */
import type { Clock, TimerHandle } from '../clock.js';
import type { Logger } from '../telemetry/logger.js';
import type { StoreHealth } from './ports.js';

export type Verdict = 'connecting' | 'up' | 'down';

/**
 * One connection attempt. Calls made before the first attempt has settled wait for it (within this
 * plus their own bound): a process starting with its fleet must not grant alone just because its
 * connection is still being set up.
 */
export const STORE_CONNECT_TIMEOUT_MS = 2_000;

/**
 * How long `connecting` may last. A cluster's or Sentinel's first attempt is a discovery and a
 * connection to each master (or the primary), and node-redis goes on retrying it without
 * rejecting `connect()`: a store not usable by then is down, with the last failure the client
 * reported as the cause (another seed node or sentinel may answer until then). A refusal
 * (WRONGPASS, NOPERM, CLUSTERDOWN...) ends it at once.
 */
export function startWaitMs(mode: StoreHealth['mode']): number {
  return STORE_CONNECT_TIMEOUT_MS * (mode === 'standalone' ? 1 : 3);
}

export interface VerdictOptions {
  clock: Clock;
  logger: Logger;
  /** The store's URL without its password. */
  url: string;
  mode: StoreHealth['mode'];
}

export class StoreVerdict {
  #state: Verdict = 'connecting';
  #lastError: StoreHealth['lastError'] = null;
  /** Ends `connecting` when the start wait (or a shorter one after a failure) is over. */
  #startTimer: TimerHandle | undefined;
  #startTimerAt = Infinity;

  constructor(private readonly o: VerdictOptions) {}

  get state(): Verdict {
    return this.#state;
  }

  get lastError(): StoreHealth['lastError'] {
    return this.#lastError === null ? null : { ...this.#lastError };
  }

  /** The cause as shown (`/status`, log lines): a data node named as a sentinel says so. */
  cause(error: unknown): string {
    return explainCause(this.o.mode, describe(error));
  }

  /** Why the store is not usable yet, while the verdict does not change. */
  note(error: unknown): void {
    this.#lastError = {
      message: this.cause(error),
      at: new Date(this.o.clock.now()).toISOString(),
    };
  }

  /** While connecting: `whenOver` runs within `ms` from now (or earlier, if already set so). */
  endStartWaitIn(ms: number, whenOver: () => void): void {
    const at = this.o.clock.now() + ms;
    if (this.#state !== 'connecting' || at >= this.#startTimerAt) return;
    this.#stopStartWait();
    this.#startTimerAt = at;
    this.#startTimer = this.o.clock.setTimeout(() => {
      this.#startTimer = undefined;
      if (this.#state === 'connecting') whenOver();
    }, ms);
    this.#startTimer.unref?.();
  }

  down(error: unknown): void {
    this.note(error);
    if (this.#state === 'down') return;
    const atStart = this.#state === 'connecting';
    this.#state = 'down';
    this.#stopStartWait();
    // Logged once per outage (a store not usable at start is one), not per failed call.
    this.o.logger.warn(
      {
        event: 'store',
        up: false,
        store: this.o.url,
        mode: this.o.mode,
        error: this.#lastError?.message,
        ...(atStart && { since: 'start' }),
      },
      'token store unavailable; each process keeps its own token until it is back',
    );
  }

  up(): void {
    if (this.#state === 'up') return;
    this.#state = 'up';
    this.#stopStartWait();
    this.o.logger.info(
      { event: 'store', up: true, store: this.o.url, mode: this.o.mode },
      'token store available',
    );
  }

  close(): void {
    this.#stopStartWait();
  }

  #stopStartWait(): void {
    if (this.#startTimer !== undefined) this.o.clock.clearTimeout(this.#startTimer);
    this.#startTimer = undefined;
  }
}

/** An error's one-line cause (the first of an AggregateError's). */
export function describe(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return describe(error.errors[0]);
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/**
 * A server's refusal: an error reply that the next attempt will get too (a wrong password, an ACL
 * user without a command, a cluster that does not serve its slots, a data node asked as a
 * sentinel). At start it settles the verdict at once: waiting longer would not change it.
 */
export function isRefusal(error: unknown): boolean {
  return /^(WRONGPASS|NOAUTH|NOPERM|CLUSTERDOWN|ERR)\b/.test(describe(error));
}

/** The cause as an operator reads it: a data node named where sentinels are expected says so. */
export function explainCause(mode: string, message: string): string {
  if (mode === 'sentinel' && /unknown command .?sentinel/i.test(message)) {
    return `${message} (STORE_URL names a data node, not a sentinel)`;
  }
  return message;
}
