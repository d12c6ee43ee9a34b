/**
 * The connection's verdict on a fake client with fake timers (docs/token-store.md "What happens
 * when it fails"): a store not usable at start is down after a bounded wait, with one line; a
 * store that answers PING but refuses scripts is down once, not flapping; a TRYAGAIN is asked
 * again within the call's budget and is no outage. The real clients are in
 * test/store-start.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import { createLogger } from '../telemetry/logger.js';
import type { StoreClient, StoreMode } from './clients.js';
import {
  RECONNECT_BASE_MS,
  RECONNECT_CAP_MS,
  STORE_HEALTH_INTERVAL_MS,
  createStoreConnection,
  defineScript,
  reconnectDelayMs,
  startWaitMs,
  type StoreConnection,
} from './connection.js';

const script = defineScript('return 1');

/** A node-redis client as the connection sees it: the test says when it is ready and what it answers. */
class FakeClient implements StoreClient {
  isReady = false;
  isOpen = false;
  readonly #ready: (() => void)[] = [];
  readonly #errors: ((error: unknown) => void)[] = [];
  /** What a script call answers, call by call (the last one repeats). */
  scriptAnswers: (() => Promise<unknown>)[] = [() => Promise.resolve(1)];
  pingAnswer: () => Promise<void> = () => Promise.resolve();
  scriptCalls = 0;

  onReady(listener: () => void): void {
    this.#ready.push(listener);
  }
  onError(listener: (error: unknown) => void): void {
    this.#errors.push(listener);
  }
  /** Like a cluster or Sentinel client: never settles while it keeps retrying. */
  connect(): Promise<unknown> {
    this.isOpen = true;
    return new Promise(() => undefined);
  }
  becomeReady(): void {
    this.isReady = true;
    for (const listener of this.#ready) listener();
  }
  fail(error: Error): void {
    for (const listener of this.#errors) listener(error);
  }
  script(): Promise<unknown> {
    const answer = this.scriptAnswers[Math.min(this.scriptCalls, this.scriptAnswers.length - 1)]!;
    this.scriptCalls += 1;
    return answer();
  }
  ping(): Promise<void> {
    return this.pingAnswer();
  }
  info(): Promise<unknown> {
    return Promise.resolve('redis_version:7.0.15\r\n');
  }
  nodes(): string[] {
    return ['127.0.0.1:6379'];
  }
  close(): Promise<void> {
    this.isOpen = false;
    return Promise.resolve();
  }
  destroy(): void {
    this.isOpen = false;
  }
}

let lines: Record<string, unknown>[];
let open: StoreConnection[];

beforeEach(() => {
  vi.useFakeTimers();
  lines = [];
  open = [];
});
afterEach(async () => {
  await Promise.all(open.map((c) => c.close()));
  vi.useRealTimers();
});

function connect(mode: StoreMode, client = new FakeClient(), healthCheckIntervalMs?: number) {
  const logger = createLogger({
    level: 'info',
    destination: { write: (line: string) => void lines.push(JSON.parse(line)) },
  });
  const connection = createStoreConnection({
    url: 'redis://app:hunter2-pw@127.0.0.1:7000,127.0.0.1:7001',
    mode,
    sentinelPrimary: 'mymaster',
    logger,
    clock: systemClock,
    random: () => 0.5,
    makeClient: () => client,
    scripts: [],
    ...(healthCheckIntervalMs !== undefined && { healthCheckIntervalMs }),
  });
  open.push(connection);
  return { connection, client };
}

const downLines = () => lines.filter((l) => l.event === 'store' && l.up === false);
const upLines = () => lines.filter((l) => l.event === 'store' && l.up === true);

/** Let the connection's microtasks and promise chains run. */
const settle = () => vi.advanceTimersByTimeAsync(0);

describe('a store that cannot be used at start', () => {
  it.each(['cluster', 'sentinel'] as const)(
    '%s: never ready and silent → down after the start wait, one line naming it; calls fail at once after',
    async (mode) => {
      const { connection } = connect(mode);
      const early = connection.runScript(script, ['k'], []);
      early.catch(() => undefined);
      await settle();
      expect(connection.health()).toMatchObject({ connecting: true, up: false });
      await vi.advanceTimersByTimeAsync(startWaitMs(mode) - 1);
      expect(connection.health().connecting).toBe(true);
      await vi.advanceTimersByTimeAsync(1);
      expect(connection.health()).toMatchObject({ connecting: false, up: false });
      // The call made at start gets its answer when the verdict is in, not later.
      await expect(early).rejects.toThrow(/not connected/);
      expect(downLines()).toHaveLength(1);
      expect(downLines()[0]).toMatchObject({
        level: 'warn',
        mode,
        since: 'start',
        store: 'redis://app@127.0.0.1:7000,127.0.0.1:7001',
        error: `not usable within ${startWaitMs(mode)} ms of start`,
      });
      expect(JSON.stringify(lines)).not.toContain('hunter2-pw');
      // Decided: the next call fails at once (no start wait), and nothing more is logged.
      const next = connection.runScript(script, ['k'], []);
      next.catch(() => undefined);
      await settle();
      await expect(next).rejects.toThrow(/not connected/);
      await vi.advanceTimersByTimeAsync(10 * STORE_HEALTH_INTERVAL_MS);
      expect(downLines()).toHaveLength(1);
    },
  );

  it('a refusal (WRONGPASS from the sentinels) decides at once and is the cause logged', async () => {
    const { connection, client } = connect('sentinel');
    await settle();
    client.fail(new Error('WRONGPASS invalid username-password pair or user is disabled.'));
    expect(connection.health()).toMatchObject({ connecting: false, up: false });
    expect(downLines()).toHaveLength(1);
    expect(downLines()[0]!.error).toMatch(/^WRONGPASS/);
  });

  it('a data node named as a sentinel says so', async () => {
    const { connection, client } = connect('sentinel');
    await settle();
    client.fail(new Error("ERR unknown command 'SENTINEL', with args beginning with: 'SENTINELS'"));
    expect(connection.health().connecting).toBe(false);
    expect(downLines()[0]!.error).toMatch(/names a data node, not a sentinel/);
  });

  it('a cluster master refusing connections: down at the start wait, that failure the cause', async () => {
    const { connection, client } = connect('cluster');
    await vi.advanceTimersByTimeAsync(100);
    client.fail(new Error('connect ECONNREFUSED 127.0.0.1:7002'));
    // Another seed node may still answer meanwhile: the wait is not cut short.
    await vi.advanceTimersByTimeAsync(startWaitMs('cluster') - 101);
    expect(connection.health().connecting).toBe(true);
    await vi.advanceTimersByTimeAsync(1);
    expect(connection.health().connecting).toBe(false);
    expect(downLines()).toHaveLength(1);
    expect(downLines()[0]!.error).toBe('connect ECONNREFUSED 127.0.0.1:7002');
  });

  it('a seed node that fails while another answers: up, nothing logged as down', async () => {
    const { connection, client } = connect('cluster');
    await settle();
    client.fail(new Error('connect ECONNREFUSED 127.0.0.1:7000'));
    await vi.advanceTimersByTimeAsync(300);
    client.becomeReady();
    await settle();
    expect(connection.health()).toMatchObject({ connecting: false, up: true });
    await vi.advanceTimersByTimeAsync(5 * STORE_HEALTH_INTERVAL_MS);
    expect(downLines()).toHaveLength(0);
    expect(upLines()).toHaveLength(1);
  });

  it('connected just before the start wait ends, its health check still running: not judged down', async () => {
    const client = new FakeClient();
    client.pingAnswer = () => new Promise((resolve) => setTimeout(resolve, 300));
    const { connection } = connect('standalone', client);
    await vi.advanceTimersByTimeAsync(startWaitMs('standalone') - 100);
    client.becomeReady();
    await vi.advanceTimersByTimeAsync(400);
    expect(connection.health()).toMatchObject({ connecting: false, up: true });
    expect(downLines()).toHaveLength(0);
  });

  it('the store answering later: up, logged once, calls go to it', async () => {
    const { connection, client } = connect('cluster');
    await vi.advanceTimersByTimeAsync(startWaitMs('cluster'));
    expect(connection.health().up).toBe(false);
    client.becomeReady();
    await settle();
    expect(connection.health()).toMatchObject({ connecting: false, up: true });
    expect(upLines()).toHaveLength(1);
    await expect(connection.runScript(script, ['k'], [])).resolves.toBe(1);
  });
});

describe('one verdict per state change', () => {
  it('answers PING but refuses scripts (NOPERM): down once, never up, over a minute of health checks', async () => {
    const client = new FakeClient();
    const noperm = () =>
      Promise.reject(new Error("NOPERM User app has no permissions to run the 'evalsha' command"));
    client.scriptAnswers = [noperm];
    // The health check runs a script too (fleet/clients.ts checkNode): refused the same way.
    client.pingAnswer = noperm;
    const { connection } = connect('standalone', client);
    await settle();
    client.becomeReady();
    await settle();
    const seen = new Set<boolean>();
    for (let t = 0; t < 60_000; t += 500) {
      connection.runScript(script, ['k'], []).catch(() => undefined);
      await vi.advanceTimersByTimeAsync(500);
      seen.add(connection.health().up);
    }
    expect([...seen]).toEqual([false]);
    expect(downLines()).toHaveLength(1);
    expect(downLines()[0]!.error).toMatch(/NOPERM/);
    expect(upLines()).toHaveLength(0);
  });

  it('a script answered TRYAGAIN once is asked again and answers; no outage', async () => {
    const client = new FakeClient();
    const { connection } = connect('cluster', client);
    await settle();
    client.becomeReady();
    await settle();
    expect(connection.health().up).toBe(true);
    client.scriptCalls = 0;
    client.scriptAnswers = [
      () => Promise.reject(new Error('TRYAGAIN Multiple keys request during rehashing of slot')),
      () => Promise.resolve('ok'),
    ];
    const call = connection.runScript(script, ['{a}x', '{a}y'], []);
    await vi.advanceTimersByTimeAsync(100);
    await expect(call).resolves.toBe('ok');
    expect(client.scriptCalls).toBe(2);
    expect(connection.health()).toMatchObject({ up: true, lastError: null });
    expect(downLines()).toHaveLength(0);
  });

  it('TRYAGAIN for longer than the call’s budget: that call fails within it', async () => {
    const client = new FakeClient();
    const { connection } = connect('standalone', client);
    await settle();
    client.becomeReady();
    await settle();
    client.scriptAnswers = [() => Promise.reject(new Error('TRYAGAIN still migrating'))];
    const call = connection.runScript(script, ['k'], []);
    call.catch(() => undefined);
    await vi.advanceTimersByTimeAsync(600);
    await expect(call).rejects.toThrow(/TRYAGAIN/);
  });
});

describe('the health check (store.healthCheckIntervalMs)', () => {
  /** A ready standalone connection whose checks are counted and, from `lostAt` checks on, fail. */
  async function checked(intervalMs?: number) {
    const client = new FakeClient();
    const state = { checks: 0, lost: false };
    client.pingAnswer = () => {
      state.checks += 1;
      return state.lost ? Promise.reject(new Error('connect ECONNREFUSED')) : Promise.resolve();
    };
    const { connection } = connect('standalone', client, intervalMs);
    client.becomeReady();
    await settle();
    // The check made when the client became ready.
    expect(state.checks).toBe(1);
    return { connection, state };
  }

  it('runs every 2 s unless told: an idle store lost is seen down at the next check', async () => {
    const { connection, state } = await checked();
    state.lost = true;
    await vi.advanceTimersByTimeAsync(STORE_HEALTH_INTERVAL_MS - 1);
    expect(connection.health().up).toBe(true);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.checks).toBe(2);
    expect(connection.health().up).toBe(false);
  });

  it('runs at the configured interval: 10 s apart, not sooner', async () => {
    const { connection, state } = await checked(10_000);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(state.checks).toBe(1 + 3);
    state.lost = true;
    await vi.advanceTimersByTimeAsync(9_999);
    expect(connection.health().up).toBe(true);
    await vi.advanceTimersByTimeAsync(1);
    expect(connection.health().up).toBe(false);
    expect(downLines()).toHaveLength(1);
  });

  it('runs at the configured interval: 100 ms apart', async () => {
    const { state } = await checked(100);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(state.checks).toBe(1 + 10);
  });
});

describe('reconnect backoff', () => {
  it('full jitter over 100 ms doubling to 2 s, never below 50 ms', () => {
    expect([0, 1, 2, 3, 4, 5, 40].map((retries) => reconnectDelayMs(retries, 1))).toEqual([
      100,
      200,
      400,
      800,
      1_600,
      RECONNECT_CAP_MS,
      RECONNECT_CAP_MS,
    ]);
    expect(reconnectDelayMs(3, 0.5)).toBe(400);
    expect(reconnectDelayMs(0, 0)).toBe(RECONNECT_BASE_MS / 2);
    expect(reconnectDelayMs(10, 0)).toBe(RECONNECT_BASE_MS / 2);
  });
});
