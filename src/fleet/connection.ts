/**
 * The one Redis connection of a process (docs/token-store.md). The only module that
 * imports the Redis client. Everything above it sees `StoreConnection`: run an atomic script,
 * read the health. Shared state is an optimisation, never a dependency (docs/design.md "Practices"): every call
 * settles within `commandTimeoutMs`, a store that is down fails calls at once, and the client
 * reconnects on its own with capped backoff (its delays, the bounded call, a TRYAGAIN asked again
 * and the undo of a late reply are here). The health is one verdict (fleet/verdict.ts), changed and
 * logged only when it changes.
 */
import type { Clock, TimerHandle } from '../clock.js';
import { StoreError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import { redactStoreUrl } from '../store-url.js';
import { makeStoreClient, type StoreAddressOptions, type StoreClient } from './clients.js';
import type { StoreScript } from './lua.js';
import type { StoreConnection, StoreHealth } from './ports.js';
import {
  STORE_CONNECT_TIMEOUT_MS,
  StoreVerdict,
  describe,
  isRefusal,
  startWaitMs,
} from './verdict.js';

/** Every store call settles within this (docs/token-store.md: no answer in 500 ms counts as down). */
export const STORE_COMMAND_TIMEOUT_MS = 500;
/** Calls in progress at once; more fail at once (a hung server must not grow a queue). */
export const STORE_MAX_PENDING = 64;
/**
 * A health check this often keeps `up` truthful while nothing else runs, unless the options say
 * otherwise (`store.healthCheckIntervalMs`, the same default; docs/token-store.md).
 */
export const STORE_HEALTH_INTERVAL_MS = 2_000;
export { STORE_CONNECT_TIMEOUT_MS, startWaitMs } from './verdict.js';
/** A script answered TRYAGAIN (a slot migration) is sent again after this, within its budget. */
export const STORE_TRYAGAIN_DELAY_MS = 25;

/** Reconnect backoff: 100 ms doubling to 2 s, full jitter (a restarted store is found within ~2 s). */
export const RECONNECT_BASE_MS = 100;
export const RECONNECT_CAP_MS = 2_000;

/** Reconnect delay after `retries` failed attempts: full jitter over 100 ms doubling to 2 s. */
export function reconnectDelayMs(retries: number, random: number): number {
  const ceiling = Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** Math.min(retries, 16));
  return Math.max(RECONNECT_BASE_MS / 2, Math.round(random * ceiling));
}

export { STORE_NOW_MS_LUA, defineScript, hashTagged, type StoreScript } from './lua.js';

export type { StoreConnection, StoreHealth } from './ports.js';

export interface StoreConnectionOptions extends StoreAddressOptions {
  logger: Logger;
  clock: Clock;
  commandTimeoutMs?: number;
  maxPending?: number;
  /** `store.healthCheckIntervalMs`: the health check's period. */
  healthCheckIntervalMs?: number;
  /** [0, 1) for reconnect jitter; Math.random when absent. */
  random?: () => number;
  /** Makes the Redis client (tests give a fake one); node-redis's when absent. */
  makeClient?: typeof makeStoreClient;
  /** The scripts the client runs (fleet/scripts.ts `STORE_SCRIPTS`). */
  scripts: readonly StoreScript[];
}

export { redactStoreUrl };

/** Connect (in the background) and return at once; calls made before it is ready wait within their bound. */
export function createStoreConnection(options: StoreConnectionOptions): StoreConnection {
  return new Connection(options);
}

class Connection implements StoreConnection {
  /** Made once, in the constructor, with the scripts of the options. */
  #made: StoreClient | undefined;
  readonly #options: StoreConnectionOptions;
  /** Redis Cluster: the keys of one script share a hash tag (fleet/scripts.ts `hashTagged`). */
  readonly hashTags: boolean;
  readonly #mode: NonNullable<StoreAddressOptions['mode']>;
  readonly #random: () => number;
  #connectRetries = 0;
  readonly #timeoutMs: number;
  readonly #maxPending: number;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #url: string;
  readonly #healthTimer: { stop(): void };
  /** While `connecting`, calls get the longer bound (they may wait for the first connection). */
  readonly #verdict: StoreVerdict;
  #serverVersion: string | null = null;
  #pending = 0;
  #closed = false;
  /**
   * Why the last connection attempt failed (wrong password, TLS to a plain server, refused), until
   * the client is ready again: a call that times out waiting for the connection names it.
   */
  #connectError: string | undefined;
  readonly #readyWaiters = new Set<() => void>();

  constructor(options: StoreConnectionOptions) {
    this.#timeoutMs = options.commandTimeoutMs ?? STORE_COMMAND_TIMEOUT_MS;
    this.#maxPending = options.maxPending ?? STORE_MAX_PENDING;
    this.#clock = options.clock;
    this.#log = options.logger;
    this.#url = redactStoreUrl(options.url);
    this.#random = options.random ?? Math.random;
    this.#mode = options.mode ?? 'standalone';
    this.#options = options;
    this.hashTags = this.#mode === 'cluster';
    this.#verdict = new StoreVerdict({
      clock: this.#clock,
      logger: this.#log,
      url: this.#url,
      mode: this.#mode,
    });
    this.#healthTimer = setIntervalOn(
      this.#clock,
      options.healthCheckIntervalMs ?? STORE_HEALTH_INTERVAL_MS,
      () => {
        this.probe().catch(() => undefined); // markDown already recorded it
      },
    );
    void this.#client; // connects in the background
  }

  get #client(): StoreClient {
    if (this.#made !== undefined) return this.#made;
    const client = (this.#options.makeClient ?? makeStoreClient)(
      this.#options,
      {
        connectTimeout: STORE_CONNECT_TIMEOUT_MS,
        reconnectStrategy: (retries) => reconnectDelayMs(retries, this.#random()),
      },
      this.#options.scripts,
    );
    this.#made = client;
    client.onError((error: unknown) => this.#clientError(error));
    client.onReady(() => {
      this.#connectError = undefined;
      this.#connectRetries = 0;
      this.#wakeReadyWaiters();
      // Learn the version and show `up` at once, not at the next health tick.
      this.probe().catch(() => undefined);
    });
    if (!this.#closed) {
      this.#endStartWaitIn(startWaitMs(this.#mode));
      this.#connect();
    }
    return client;
  }

  /** Not usable within `ms` from now (and not before): the first attempt has failed. */
  #endStartWaitIn(ms: number): void {
    this.#verdict.endStartWaitIn(ms, () => {
      // Connected: the health check and the calls give the verdict (each within its own bound).
      if (this.#closed || this.#client.isReady) return;
      const cause = this.#connectError ?? `not usable within ${ms} ms of start`;
      this.#attemptFailed(new StoreError(cause));
    });
  }

  runScript(
    script: StoreScript,
    keys: readonly string[],
    args: readonly string[],
    onLateReply?: (reply: unknown) => void,
  ): Promise<unknown> {
    const client = this.#client;
    return this.#call(
      'store script',
      () => client.script(script.name, keys, args),
      onLateReply,
      // In a cluster one call reaches one master: only the health probe (every master) says `up`.
      this.#mode !== 'cluster',
    );
  }

  probe(): Promise<string> {
    return this.#call('store PING', async () => {
      await this.#client.ping();
      if (this.#serverVersion === null) {
        const info: unknown = await this.#client.info();
        const text = typeof info === 'string' ? info : Buffer.isBuffer(info) ? info.toString() : '';
        this.#serverVersion = /redis_version:([^\r\n]+)/.exec(text)?.[1] ?? 'unknown';
      }
      return this.#serverVersion;
    });
  }

  health(): StoreHealth {
    return {
      url: this.#url,
      mode: this.#mode,
      nodes: this.#made?.nodes() ?? [],
      up: this.#verdict.state === 'up',
      connecting: this.#verdict.state === 'connecting',
      lastError: this.#verdict.lastError,
      serverVersion: this.#serverVersion,
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#healthTimer.stop();
    this.#verdict.close();
    this.#wakeReadyWaiters();
    const client = this.#made;
    if (client === undefined) return;
    try {
      if (client.isOpen) await client.close();
    } catch {
      client.destroy();
    }
  }

  /**
   * Connect in the background. A standalone client reconnects on its own; a cluster or Sentinel
   * client whose first discovery fails (no seed node or sentinel answers) is asked again after
   * the same backoff.
   */
  #connect(): void {
    this.#client.connect().catch((error: unknown) => {
      this.#attemptFailed(error);
      if (this.#mode === 'standalone' || this.#closed) return;
      const retry = this.#clock.setTimeout(
        () => {
          if (!this.#closed && !this.#client.isOpen) this.#connect();
        },
        reconnectDelayMs(this.#connectRetries++, this.#random()),
      );
      retry.unref?.();
    });
  }

  /**
   * An error the client reports. A standalone client's is a failed connection attempt. A cluster
   * or Sentinel client reports one per seed node or sentinel that fails while it goes on with the
   * next, and one per master it cannot reach: while connecting, the attempt has failed when
   * `connect()` rejects (`#connect`), at a refusal, or when the start wait is over
   * (`#endStartWaitIn`), so a member neither acts alone while its discovery is still under way
   * nor waits longer than a first call would for a store that cannot be used.
   */
  #clientError(error: unknown): void {
    if (this.#mode === 'standalone' || this.#verdict.state !== 'connecting' || isRefusal(error)) {
      this.#attemptFailed(error);
      return;
    }
    this.#connectError = this.#verdict.cause(error);
    this.#verdict.note(error);
  }

  #attemptFailed(error: unknown): void {
    this.#connectError = this.#verdict.cause(error);
    this.#verdict.down(error);
    // A caller waiting for the connection learns at once that this attempt failed.
    for (const wake of this.#readyWaiters) wake();
  }

  #wakeReadyWaiters(): void {
    for (const wake of this.#readyWaiters) wake();
    this.#readyWaiters.clear();
  }

  /**
   * Resolves when the client is ready, a connection attempt fails, or `deadline` passes (then the
   * call fails as "down"). A store already judged down is not waited for.
   */
  #whenReady(deadline: number): Promise<void> {
    if (this.#client.isReady || this.#verdict.state === 'down') return Promise.resolve();
    const clock = this.#clock;
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        clock.clearTimeout(timer);
        this.#readyWaiters.delete(wake);
        resolve();
      };
      this.#readyWaiters.add(wake);
      const timer = clock.setTimeout(wake, Math.max(0, deadline - clock.now()));
      timer.unref?.();
    });
  }

  /** One bounded call: the client's own timeout only covers the write queue, so race a timer. */
  async #call<T>(
    what: string,
    send: () => Promise<T>,
    onLateReply?: (reply: T) => void,
    showsUp = true,
  ): Promise<T> {
    if (this.#closed) throw new StoreError(`${what}: the store connection is closed`);
    if (this.#pending >= this.#maxPending) {
      const error = new StoreError(`${what}: ${this.#maxPending} store calls already in progress`);
      this.#verdict.down(error);
      throw error;
    }
    this.#pending += 1;
    // Until the verdict is in, a call may wait for the first connection (the start wait).
    const budget =
      this.#verdict.state === 'connecting'
        ? startWaitMs(this.#mode) + this.#timeoutMs
        : this.#timeoutMs;
    const deadline = this.#clock.now() + budget;
    const late = { givenUp: false };
    let timer: TimerHandle | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = this.#clock.setTimeout(() => {
          late.givenUp = true;
          reject(this.#noAnswer(what, budget));
        }, budget);
        timer.unref?.();
      });
      const attempt = this.#attempt(what, deadline, send);
      attempt.then(
        (reply) => {
          if (late.givenUp) callLate(onLateReply, reply);
        },
        () => undefined, // a late rejection after the timeout is not unhandled
      );
      const result = await Promise.race([attempt, timeout]);
      if (showsUp) this.#verdict.up();
      return result;
    } catch (error) {
      const wrapped =
        error instanceof StoreError ? error : new StoreError(`${what}: ${describe(error)}`, error);
      this.#verdict.down(wrapped);
      throw wrapped;
    } finally {
      this.#pending -= 1;
      if (timer !== undefined) this.#clock.clearTimeout(timer);
    }
  }

  async #attempt<T>(what: string, deadline: number, send: () => Promise<T>): Promise<T> {
    await this.#whenReady(deadline);
    if (!this.#client.isReady) {
      const last = this.#verdict.lastError;
      const cause = last === null ? '' : ` (${last.message})`;
      throw new StoreError(`${what}: not connected${cause}`);
    }
    return sendRetryingTryAgain(this.#clock, deadline, send);
  }

  /** Still not connected: the cause is the connection's, not a slow answer. */
  #noAnswer(what: string, budget: number): StoreError {
    const notConnected = !this.#client.isReady && this.#connectError !== undefined;
    return new StoreError(
      notConnected
        ? `${what}: not connected (${this.#connectError})`
        : `${what}: no answer within ${budget} ms`,
    );
  }
}

/** The call was given up but the server ran it after all: the caller may undo what it can. */
function callLate<T>(onLateReply: ((reply: T) => void) | undefined, reply: T): void {
  if (onLateReply === undefined) return;
  try {
    onLateReply(reply);
  } catch {
    // An undo that throws leaves what it would have undone to its TTL; never unhandled.
  }
}

/** A repeating timer on the injected clock, unref'd. */
function setIntervalOn(clock: Clock, everyMs: number, fn: () => void): { stop(): void } {
  let handle: TimerHandle | undefined;
  let stopped = false;
  const arm = (): void => {
    handle = clock.setTimeout(() => {
      if (stopped) return;
      fn();
      arm();
    }, everyMs);
    handle.unref?.();
  };
  arm();
  return {
    stop() {
      stopped = true;
      if (handle !== undefined) clock.clearTimeout(handle);
    },
  };
}

/**
 * TRYAGAIN: a multi-key command during a slot migration whose keys are split between the two
 * nodes for a moment. Asked again shortly it succeeds; it is not an outage. (ASK and MOVED are
 * followed by node-redis itself.)
 */
function isTryAgain(error: unknown): boolean {
  return describe(error).startsWith('TRYAGAIN');
}

/** `send`, asked again after each TRYAGAIN while the next try is before `deadline`: no outage. */
async function sendRetryingTryAgain<T>(
  clock: Pick<Clock, 'now' | 'setTimeout'>,
  deadline: number,
  send: () => Promise<T>,
): Promise<T> {
  for (;;) {
    try {
      return await send();
    } catch (error) {
      if (!isTryAgain(error) || clock.now() + STORE_TRYAGAIN_DELAY_MS >= deadline) throw error;
    }
    await new Promise<void>((resolve) => {
      clock.setTimeout(resolve, STORE_TRYAGAIN_DELAY_MS).unref?.();
    });
  }
}
