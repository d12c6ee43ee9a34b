/**
 * The one Redis connection of a process (docs/token-store.md). The only module that
 * imports the Redis client. Everything above it sees `StoreConnection`: run an atomic script,
 * read the health. Shared state is an optimisation, never a dependency (docs/design.md "Practices"): every call
 * settles within `commandTimeoutMs`, a store that is down fails calls at once, and the client
 * reconnects on its own with capped backoff.
 */
import { createHash } from 'node:crypto';
import { createClient } from '@redis/client';
import type { Clock, TimerHandle } from '../clock.js';
import { StoreError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import { redactStoreUrl } from '../safe-text.js';
import type { StoreHealth } from './ports.js';

/** Every store call settles within this (docs/token-store.md: no answer in 500 ms counts as down). */
export const STORE_COMMAND_TIMEOUT_MS = 500;
/** Calls in progress at once; more fail at once (a hung server must not grow a queue). */
export const STORE_MAX_PENDING = 64;
/** A PING this often keeps `up` truthful while nothing else runs (docs/token-store.md: shown within 5 s). */
export const STORE_HEALTH_INTERVAL_MS = 2_000;
/**
 * One connection attempt. Calls made before the first attempt has settled wait for it (within this
 * plus their own bound): a process starting with its fleet must not grant alone just because its
 * connection is still being set up.
 */
export const STORE_CONNECT_TIMEOUT_MS = 2_000;
/** Reconnect backoff: 100 ms doubling to 2 s, full jitter (a restarted store is found within ~2 s). */
export const RECONNECT_BASE_MS = 100;
export const RECONNECT_CAP_MS = 2_000;

/** A Lua script run atomically by the server (EVALSHA, EVAL when the server does not know it yet). */
export interface StoreScript {
  readonly lua: string;
  readonly sha1: string;
}

/**
 * Define a script once (module scope). Scripts may read the store's clock, so every process of a
 * fleet agrees on "now": start with {@link STORE_NOW_MS_LUA} to get `now_ms`. Keys the script
 * touches must be passed in `keys` (Redis Cluster / ACL key patterns depend on it).
 */
export function defineScript(lua: string): StoreScript {
  return { lua, sha1: createHash('sha1').update(lua).digest('hex') };
}

/**
 * Lua prelude: `local now_ms = <the store's clock in ms>`. Allowed before writes since Redis 5
 * (scripts replicate their effects, not themselves).
 */
export const STORE_NOW_MS_LUA =
  "local __t = redis.call('TIME')\nlocal now_ms = tonumber(__t[1]) * 1000 + math.floor(tonumber(__t[2]) / 1000)\n";

export type { StoreHealth } from './ports.js';

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
}

export interface StoreConnectionOptions {
  url: string;
  logger: Logger;
  clock: Clock;
  commandTimeoutMs?: number;
  maxPending?: number;
  healthIntervalMs?: number;
  /** [0, 1) for reconnect jitter; Math.random when absent. */
  random?: () => number;
}

export { redactStoreUrl };

/** Reconnect delay after `retries` failed attempts: full jitter over 100 ms doubling to 2 s. */
export function reconnectDelayMs(retries: number, random: number): number {
  const ceiling = Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** Math.min(retries, 16));
  return Math.max(RECONNECT_BASE_MS / 2, Math.round(random * ceiling));
}

/** Connect (in the background) and return at once; calls made before it is ready wait within their bound. */
export function createStoreConnection(options: StoreConnectionOptions): StoreConnection {
  return new Connection(options);
}

class Connection implements StoreConnection {
  readonly #client: ReturnType<typeof createClient>;
  readonly #timeoutMs: number;
  readonly #maxPending: number;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #url: string;
  readonly #healthTimer: { stop(): void };
  #up = false;
  #lastError: StoreHealth['lastError'] = null;
  #serverVersion: string | null = null;
  #pending = 0;
  #closed = false;
  /** The first connection attempt succeeded or failed; until then calls get the longer bound. */
  #firstAttemptSettled = false;
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
    const random = options.random ?? Math.random;
    this.#client = createClient({
      url: options.url,
      // Fail at once while disconnected instead of queueing: the keeper falls back to its own token.
      disableOfflineQueue: true,
      socket: {
        connectTimeout: STORE_CONNECT_TIMEOUT_MS,
        reconnectStrategy: (retries) => reconnectDelayMs(retries, random()),
      },
    });
    this.#client.on('error', (error: unknown) => this.#attemptFailed(error));
    this.#client.on('ready', () => {
      this.#firstAttemptSettled = true;
      this.#connectError = undefined;
      this.#wakeReadyWaiters();
      // Learn the version and show `up` at once, not at the next health tick.
      this.probe().catch(() => undefined);
    });
    this.#client.connect().catch((error: unknown) => this.#attemptFailed(error));
    this.#healthTimer = setIntervalOn(
      this.#clock,
      options.healthIntervalMs ?? STORE_HEALTH_INTERVAL_MS,
      () => {
        this.probe().catch(() => undefined); // markDown already recorded it
      },
    );
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
      async (): Promise<unknown> => {
        const tail = [String(keys.length), ...keys, ...args];
        try {
          return await client.sendCommand(['EVALSHA', script.sha1, ...tail]);
        } catch (error) {
          if (!describe(error).startsWith('NOSCRIPT')) throw error;
          return client.sendCommand(['EVAL', script.lua, ...tail]);
        }
      },
      onLateReply,
    );
  }

  probe(): Promise<string> {
    return this.#call('store PING', async () => {
      await this.#client.sendCommand(['PING']);
      if (this.#serverVersion === null) {
        const info: unknown = await this.#client.sendCommand(['INFO', 'server']);
        const text = typeof info === 'string' ? info : Buffer.isBuffer(info) ? info.toString() : '';
        this.#serverVersion = /redis_version:([^\r\n]+)/.exec(text)?.[1] ?? 'unknown';
      }
      return this.#serverVersion;
    });
  }

  health(): StoreHealth {
    return {
      url: this.#url,
      up: this.#up,
      connecting: !this.#firstAttemptSettled,
      lastError: this.#lastError === null ? null : { ...this.#lastError },
      serverVersion: this.#serverVersion,
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#healthTimer.stop();
    this.#wakeReadyWaiters();
    try {
      if (this.#client.isOpen) await this.#client.close();
    } catch {
      this.#client.destroy();
    }
  }

  #attemptFailed(error: unknown): void {
    this.#firstAttemptSettled = true;
    this.#connectError = describe(error);
    this.#markDown(error);
    // A caller waiting for the connection learns at once that this attempt failed.
    for (const wake of this.#readyWaiters) wake();
  }

  #wakeReadyWaiters(): void {
    for (const wake of this.#readyWaiters) wake();
    this.#readyWaiters.clear();
  }

  #markDown(error: unknown): void {
    const message = describe(error);
    this.#lastError = { message, at: new Date(this.#clock.now()).toISOString() };
    if (!this.#up) return;
    this.#up = false;
    // Logged once per outage, not per failed call.
    this.#log.warn(
      { event: 'store', up: false, store: this.#url, error: message },
      'token store unavailable; each process keeps its own token until it is back',
    );
  }

  #markUp(): void {
    if (this.#up) return;
    this.#up = true;
    this.#log.info({ event: 'store', up: true, store: this.#url }, 'token store available');
  }

  /**
   * Resolves when the client is ready, a connection attempt fails, or `deadline` passes (then the
   * call fails as "down").
   */
  #whenReady(deadline: number): Promise<void> {
    if (this.#client.isReady) return Promise.resolve();
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
  ): Promise<T> {
    if (this.#closed) throw new StoreError(`${what}: the store connection is closed`);
    if (this.#pending >= this.#maxPending) {
      const error = new StoreError(`${what}: ${this.#maxPending} store calls already in progress`);
      this.#markDown(error);
      throw error;
    }
    this.#pending += 1;
    const budget = this.#firstAttemptSettled
      ? this.#timeoutMs
      : STORE_CONNECT_TIMEOUT_MS + this.#timeoutMs;
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
      this.#markUp();
      return result;
    } catch (error) {
      const wrapped =
        error instanceof StoreError ? error : new StoreError(`${what}: ${describe(error)}`, error);
      this.#markDown(wrapped);
      throw wrapped;
    } finally {
      this.#pending -= 1;
      if (timer !== undefined) this.#clock.clearTimeout(timer);
    }
  }

  async #attempt<T>(what: string, deadline: number, send: () => Promise<T>): Promise<T> {
    await this.#whenReady(deadline);
    if (!this.#client.isReady) {
      const cause = this.#lastError === null ? '' : ` (${this.#lastError.message})`;
      throw new StoreError(`${what}: not connected${cause}`);
    }
    return send();
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

function describe(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return describe(error.errors[0]);
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}
