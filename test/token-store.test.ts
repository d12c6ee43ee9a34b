/**
 * The shared store against a real `redis-server` on a free loopback port: the connection's bounds,
 * the scripts (lease, compare-and-set, compare-and-delete), the sealing, and the coordinator that
 * wraps the keeper's grant point.
 */
import { connect, createServer, type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/clock.js';
import { StoreError } from '../src/errors.js';
import {
  STORE_NOW_MS_LUA,
  createStoreConnection,
  defineScript,
  redactStoreUrl,
  type StoreConnection,
  type StoreScript,
} from '../src/fleet/connection.js';
import { deriveEntryKeys, openValue, sealValue } from '../src/fleet/crypto.js';
import { TOKEN_SCRIPTS, createTokenSetStore, type TokenSetStore } from '../src/fleet/token-sets.js';
import { createLogger } from '../src/telemetry/logger.js';
import type { GrantOutcome, RefreshSource } from '../src/token/coordination.js';
import { createTokenCoordinator } from '../src/token/shared.js';
import {
  startRedisServer,
  TEST_STORE_COMMAND_TIMEOUT_MS,
  type RedisServer,
} from './helpers/redis-server.js';
import { realClock, waitFor } from './helpers/wait.js';

/** Leases and TTLs run on the redis-server's own clock: the coordinator's waits are real. */
const redisClock = realClock("the store's leases expire on the redis-server's own clock");

const TOKEN_URL = 'https://id.example.test/oauth/token/';
const CLIENT_ID = 'client-7f3a9';
const SECRET = 'secret-d41d8cd98f00b204';

let redis: RedisServer;
const open: StoreConnection[] = [];
const lines: string[] = [];
const logger = createLogger({
  level: 'debug',
  destination: { write: (line: string) => void lines.push(line) },
});

beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.close(); // undefined when redis-server is missing: its own error says so
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
  await redis.command('FLUSHALL');
});

function storeConnection(
  url = redis.url,
  commandTimeoutMs?: number,
  scripts: readonly StoreScript[] = TOKEN_SCRIPTS,
): StoreConnection {
  const connection = createStoreConnection({
    url,
    logger,
    clock: systemClock,
    commandTimeoutMs,
    scripts,
  });
  open.push(connection);
  return connection;
}

function tokenStore(
  connection: StoreConnection,
  secret = SECRET,
  clientId = CLIENT_ID,
): TokenSetStore {
  return createTokenSetStore({
    connection,
    leaseTtlMs: 12_000,
    keyPrefix: 'oauth-sidecar:',
    tokenUrl: TOKEN_URL,
    scopes: ['read'],
    readIdentity: () => Promise.resolve({ clientId, clientSecret: secret }),
    now: () => Date.now(),
  });
}

const sharedSet = (accessToken: string, refreshToken?: string) => ({
  accessToken,
  refreshToken,
  sentAt: Date.now(),
  lifetimeSeconds: 60,
  grant: 'client_credentials' as const,
});

describe('sealing and names', () => {
  const identity = {
    keyPrefix: 'p:',
    tokenUrl: TOKEN_URL,
    clientId: CLIENT_ID,
    clientSecret: SECRET,
    scopes: ['b', 'a'],
  };

  it('names entries by a hash: no client id, no secret, scope order irrelevant', () => {
    const keys = deriveEntryKeys(identity);
    expect(keys.entry).toMatch(/^p:token:[0-9a-f]{32}$/);
    expect(keys.lease).toMatch(/^p:lease:[0-9a-f]{32}$/);
    expect(keys.entry).not.toContain(CLIENT_ID);
    expect(deriveEntryKeys({ ...identity, scopes: ['a', 'b'] }).entry).toBe(keys.entry);
    expect(deriveEntryKeys({ ...identity, clientId: 'other' }).entry).not.toBe(keys.entry);
  });

  it('opens what it sealed; another secret, entry key, generation or a flipped bit opens nothing', () => {
    const keys = deriveEntryKeys(identity);
    const sealed = sealValue(keys, '{"a":"tok"}', 3);
    expect(sealed).not.toContain('tok');
    expect(openValue(keys, sealed, 3)).toBe('{"a":"tok"}');
    expect(
      openValue(deriveEntryKeys({ ...identity, clientSecret: 'rotated' }), sealed, 3),
    ).toBeUndefined();
    expect(openValue({ ...keys, entry: 'p:token:other' }, sealed, 3)).toBeUndefined();
    // The generation is associated data: an old entry relabelled as a newer one opens nothing.
    expect(openValue(keys, sealed, 4)).toBeUndefined();
    // Flip one bit of the decoded body: editing a base64 character could change only padding bits.
    const [version, iv, body] = sealed.split('.');
    const bytes = Buffer.from(body ?? '', 'base64url');
    bytes[0] = (bytes[0] ?? 0) ^ 1;
    const flipped = `${version}.${iv}.${bytes.toString('base64url')}`;
    expect(openValue(keys, flipped, 3)).toBeUndefined();
    expect(openValue(keys, 'garbage', 3)).toBeUndefined();
  });

  it('shows the store URL without its password', () => {
    expect(redactStoreUrl('rediss://app:s3cret@redis.internal:6380/2')).toBe(
      'rediss://app@redis.internal:6380/2',
    );
    expect(redactStoreUrl('redis://:s3cret@h:1')).not.toContain('s3cret');
  });
});

describe('connection', () => {
  it('runs scripts (EVAL once, then EVALSHA) and reads the store clock', async () => {
    const script = defineScript(`${STORE_NOW_MS_LUA}return now_ms`);
    const connection = storeConnection(redis.url, undefined, [script]);
    const first = Number(await connection.runScript(script, [], []));
    const second = Number(await connection.runScript(script, [], []));
    expect(Math.abs(first - Date.now())).toBeLessThan(2_000);
    expect(second).toBeGreaterThanOrEqual(first);
    expect(await connection.probe()).toMatch(/^\d+\.\d+/);
    expect(connection.health().up).toBe(true);
  });

  it('fails at once while nothing listens, and within its bound while the server hangs', async () => {
    const down = storeConnection('redis://127.0.0.1:1');
    await expect(down.probe()).rejects.toBeInstanceOf(StoreError);
    expect(down.health().up).toBe(false);

    const connection = storeConnection(redis.url, 300);
    await connection.probe();
    redis.pause();
    try {
      await expect(connection.probe()).rejects.toThrow(/no answer within 300 ms/);
      expect(connection.health()).toMatchObject({
        up: false,
        lastError: { message: expect.stringMatching(/300 ms/) },
      });
    } finally {
      redis.resume();
    }
    await expect(connection.probe()).resolves.toMatch(/\d/);
    expect(connection.health().up).toBe(true);
  });

  it('a call made while the first connection is still being set up waits for it (not only 500 ms)', async () => {
    // A front that holds every new connection for 1.2 s before passing it to Redis (a slow
    // handshake, a busy node at a fleet's start-up).
    const front = createServer((socket) => {
      setTimeout(() => {
        const upstream = connect(redis.port, '127.0.0.1');
        socket.pipe(upstream).pipe(socket);
        socket.on('error', () => upstream.destroy());
        upstream.on('error', () => socket.destroy());
      }, 1_200);
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    try {
      const port = (front.address() as AddressInfo).port;
      const connection = storeConnection(`redis://127.0.0.1:${port}`);
      // It waited out the 1.2 s set-up instead of failing at the ordinary 500 ms bound.
      await expect(connection.probe()).resolves.toMatch(/\d/);
      // Once connected, the ordinary 500 ms bound applies again.
      expect(connection.health().up).toBe(true);
    } finally {
      front.close();
    }
  });

  it('refuses calls beyond its pending limit instead of queueing them', async () => {
    const connection = createStoreConnection({
      url: redis.url,
      logger,
      clock: systemClock,
      maxPending: 2,
      commandTimeoutMs: 300,
      scripts: TOKEN_SCRIPTS,
    });
    open.push(connection);
    await connection.probe();
    redis.pause();
    try {
      const calls = [connection.probe(), connection.probe(), connection.probe()];
      const results = await Promise.allSettled(calls);
      const reasons = results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'));
      expect(reasons[2]).toMatch(/2 store calls already in progress/);
      expect(reasons.slice(0, 2).every((r) => /no answer within/.test(r))).toBe(true);
    } finally {
      redis.resume();
    }
  });

  it('logs an outage once and recovers after a restart', async () => {
    const connection = storeConnection();
    await connection.probe();
    const before = lines.length;
    await redis.stop();
    try {
      for (let i = 0; i < 5; i++) await connection.probe().catch(() => undefined);
      const downLines = lines.slice(before).filter((l) => l.includes('token store unavailable'));
      expect(downLines).toHaveLength(1);
      expect(connection.health().up).toBe(false);
    } finally {
      await redis.start();
    }
    await waitFor(
      () =>
        connection.probe().then(
          () => true,
          () => false,
        ),
      10_000,
      'the store back',
    );
    expect(connection.health().up).toBe(true);
  });
});

describe('token-set entry', () => {
  it('one lease at a time; only its holder publishes; the generation only grows', async () => {
    const a = tokenStore(storeConnection());
    const b = tokenStore(storeConnection());
    const first = await a.takeLease(5_000);
    const second = await b.takeLease(5_000);
    expect(first.lease).toBeDefined();
    expect(second.lease).toBeUndefined();
    expect(first.entry).toEqual({ generation: 0, tokenSet: undefined, unreadable: false });

    const forged = { owner: 'not-the-owner', keys: first.lease!.keys };
    expect(await b.publish(forged, sharedSet('forged'), 0)).toBeUndefined();
    expect(await a.publish(first.lease!, sharedSet('tok-1', 'rt-1'), 0)).toBe(1);
    // Published and released in one script: the lease is free again.
    const next = await b.takeLease(5_000);
    expect(next.entry.generation).toBe(1);
    expect(next.entry.tokenSet).toMatchObject({ accessToken: 'tok-1', refreshToken: 'rt-1' });
    // A writer that knew a higher generation (the store lost its data meanwhile) still goes up.
    expect(await b.publish(next.lease!, sharedSet('tok-2'), 41)).toBe(42);
  });

  it('a refresh token is spent once: only by the lease holder, only for the current generation', async () => {
    const a = tokenStore(storeConnection());
    const b = tokenStore(storeConnection());
    const first = await a.takeLease(5_000);
    await a.publish(first.lease!, sharedSet('tok-1', 'rt-1'), 0);
    const taken = await a.takeLease(5_000);
    expect(taken.entry.refreshSpent).toBeUndefined();
    expect(await b.spendRefresh({ ...taken.lease!, owner: 'not-the-owner' }, 1)).toBe(false);
    expect(await a.spendRefresh(taken.lease!, 2)).toBe(false); // not the stored generation
    expect(await a.spendRefresh(taken.lease!, 1)).toBe(true);
    expect(await a.spendRefresh(taken.lease!, 1)).toBe(false); // once
    await a.release(taken.lease!);
    // The holder's answer never arrived: the next holder sees it spent and does not present it.
    const next = await b.takeLease(5_000);
    expect(next.entry).toMatchObject({ generation: 1, refreshSpent: true });
    // Publishing a newer generation starts afresh.
    expect(await b.publish(next.lease!, sharedSet('tok-2', 'rt-2'), 1)).toBe(2);
    expect((await a.takeLease(5_000)).entry.refreshSpent).toBeUndefined();
  });

  it('never writes over a newer generation; a gen relabelled by hand reads as unreadable', async () => {
    const connection = storeConnection();
    const a = tokenStore(connection);
    const first = await a.takeLease(5_000);
    await a.publish(first.lease!, sharedSet('tok-1', 'rt-1'), 4); // generation 5
    const entryKey = first.lease!.keys.entry;
    const taken = await a.takeLease(5_000);
    // A writer that knows less than the store holds is refused, lease or not.
    expect(await a.publish(taken.lease!, sharedSet('tok-old'), 2)).toBeUndefined();
    await a.release(taken.lease!);
    await redis.command('HSET', entryKey, 'gen', '9');
    expect((await a.read()).entry).toEqual({
      generation: 9,
      tokenSet: undefined,
      unreadable: true,
    });
    await redis.command('HSET', entryKey, 'gen', '-3');
    expect((await a.read()).entry).toMatchObject({ generation: 0, unreadable: true });
  });

  it('a lease without an expiry, or a longer one, is given the reader’s TTL', async () => {
    const a = tokenStore(storeConnection()); // leaseTtlMs 12 000
    const taken = await a.takeLease(5_000);
    const leaseKey = taken.lease!.keys.lease;
    await a.release(taken.lease!);
    await redis.command('SET', leaseKey, 'restored-owner');
    expect((await a.read()).leaseHeld).toBe(true);
    const ttl = Number(/:(-?\d+)/.exec(await redis.command('PTTL', leaseKey))?.[1]);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(12_000);
    await redis.command('SET', leaseKey, 'long-owner', 'PX', '600000');
    expect((await a.takeLease(5_000)).lease).toBeUndefined();
    const capped = Number(/:(-?\d+)/.exec(await redis.command('PTTL', leaseKey))?.[1]);
    expect(capped).toBeLessThanOrEqual(5_000);
    await redis.command('DEL', leaseKey);
  });

  it('keys of the wrong type read as absent (never a store error) and the next holder replaces them', async () => {
    const connection = storeConnection();
    const a = tokenStore(connection);
    const { keys } = (await a.takeLease(5_000)).lease!;
    await redis.command('DEL', keys.lease);
    await redis.command('SET', keys.entry, 'a-string-not-a-hash');
    await redis.command('SADD', keys.lease, 'a-set-not-a-lease');
    expect((await a.read()).entry).toEqual({
      generation: 0,
      tokenSet: undefined,
      unreadable: false,
    });
    const taken = await a.takeLease(5_000);
    expect(taken.lease).toBeDefined();
    expect(await a.spendRefresh(taken.lease!, 0)).toBe(false);
    expect(await a.publish(taken.lease!, sharedSet('tok-1'), 0)).toBe(1);
    expect((await a.read()).entry.tokenSet?.accessToken).toBe('tok-1');
    expect((await a.deleteIfCurrent('tok-other')).deleted).toBe(false);
    expect(connection.health().up).toBe(true);
  });

  it('a field larger than a token set can be is unreadable and never leaves the store', async () => {
    const a = tokenStore(storeConnection());
    const first = await a.takeLease(5_000);
    await a.publish(first.lease!, sharedSet('tok-1'), 0);
    await redis.command('HSET', first.lease!.keys.entry, 'data', 'v1.'.padEnd(1024 * 1024, 'A'));
    expect((await a.read()).entry).toEqual({
      generation: 1,
      tokenSet: undefined,
      unreadable: true,
    });
    // The lease holder writes over it.
    const taken = await a.takeLease(5_000);
    expect(await a.publish(taken.lease!, sharedSet('tok-2'), 1)).toBe(2);
    expect((await a.read()).entry.tokenSet?.accessToken).toBe('tok-2');
  });

  it('a lease expires on its own when its holder dies', async () => {
    const a = tokenStore(storeConnection());
    const { lease } = await a.takeLease(200);
    expect(lease).toBeDefined();
    expect((await a.read()).leaseHeld).toBe(true);
    // The TTL runs on the redis-server's own clock.
    await waitFor(async () => !(await a.read()).leaseHeld, 10_000, 'the lease to expire');
    expect(await a.publish(lease!, sharedSet('late'), 0)).toBeUndefined();
  });

  it('a lease whose call was given up (no answer in time) but ran on the server later is released at once', async () => {
    const connection = storeConnection(redis.url, 300);
    // Every late reply the server sends, whoever asked for it (recorded with or without a callback).
    const late: unknown[] = [];
    const recording: StoreConnection = {
      ...connection,
      runScript: (script, keys, args, onLateReply) =>
        connection.runScript(script, keys, args, (reply) => {
          late.push(reply);
          onLateReply?.(reply);
        }),
    };
    const slow = tokenStore(recording);
    const watcher = tokenStore(storeConnection());
    await slow.read(); // connected, scripts known to the server
    redis.pause();
    try {
      await expect(slow.takeLease(10_000)).rejects.toThrow(/no answer within 300 ms/);
    } finally {
      redis.resume();
    }
    // The server runs the queued script on resuming: it took the lease, for a caller that has
    // since renewed without the store. Released within a moment, not after the 10 s TTL.
    await waitFor(() => late.length > 0, 5_000, 'the late reply');
    expect((late[0] as unknown[])[2]).toBe(1);
    await waitFor(async () => !(await watcher.read()).leaseHeld, 2_000, 'the lease released');
    expect((await watcher.takeLease(1_000)).lease).toBeDefined();
  });

  it('release deletes only its own lease', async () => {
    const a = tokenStore(storeConnection());
    const { lease } = await a.takeLease(5_000);
    await a.release({ owner: 'someone-else', keys: lease!.keys });
    expect((await a.read()).leaseHeld).toBe(true);
    await a.release(lease!);
    expect((await a.read()).leaseHeld).toBe(false);
  });

  it('compare-and-delete: only while the entry still holds the rejected token', async () => {
    const a = tokenStore(storeConnection());
    const { lease } = await a.takeLease(5_000);
    await a.publish(lease!, sharedSet('tok-new'), 0);
    const stale = await a.deleteIfCurrent('tok-old');
    expect(stale.deleted).toBe(false);
    expect(stale.entry.tokenSet?.accessToken).toBe('tok-new');
    const hit = await a.deleteIfCurrent('tok-new');
    expect(hit).toMatchObject({ deleted: true, entry: { generation: 1 } });
    expect((await a.read()).entry).toEqual({
      generation: 1,
      tokenSet: undefined,
      unreadable: false,
    });
  });

  it('an entry sealed under another secret reads as unreadable, never as a token', async () => {
    const a = tokenStore(storeConnection());
    const rotated = tokenStore(storeConnection(), 'another-secret');
    const { lease } = await a.takeLease(5_000);
    await a.publish(lease!, sharedSet('tok-a'), 0);
    const { entry } = await rotated.read();
    expect(entry).toEqual({ generation: 1, tokenSet: undefined, unreadable: true });
  });

  it('no token, refresh token, client id or secret is readable in any key or value', async () => {
    const a = tokenStore(storeConnection());
    const { lease } = await a.takeLease(5_000);
    await a.publish(lease!, sharedSet('access-abc123', 'refresh-def456'), 0);
    await a.takeLease(5_000);
    const dump = await redis.dump();
    expect(dump.size).toBe(2);
    for (const [key, value] of dump) {
      for (const secret of ['access-abc123', 'refresh-def456', CLIENT_ID, SECRET]) {
        expect(key).not.toContain(secret);
        expect(value).not.toContain(secret);
      }
    }
  });
});

describe('coordinator', () => {
  // A token request's bound, and with it the lease TTL (timeoutMs + 2 s): the grants below take
  // 10–300 ms, and the tests that wait out a dead holder's lease wait 2.25 s of the store's clock.
  const settings = { refreshMarginSeconds: 60, refreshFraction: 0.2, timeoutMs: 250 };
  // Store commands bounded at 5 s, not 500 ms: a poll that timed out on a loaded machine would
  // make a follower grant without the store, which is right then but not what these tests test.
  const fleetConnection = () => storeConnection(redis.url, TEST_STORE_COMMAND_TIMEOUT_MS);

  /**
   * `aheadMs`: this process's clock runs ahead of the others' (time passed for it alone).
   * `beforeSleep`: called before each of the coordinator's waits (its polls of a lease holder).
   */
  function coordinator(connection: StoreConnection, aheadMs = 0, beforeSleep = async () => {}) {
    return createTokenCoordinator({
      store: tokenStore(connection),
      health: () => connection.health(),
      settings,
      now: () => Date.now() + aheadMs,
      sleep: async (ms) => {
        await beforeSleep();
        await redisClock.sleep(ms);
      },
      logger,
    });
  }

  /** A grant that takes `ms` and counts itself. */
  function granter(counter: { n: number; sources: RefreshSource[] }, ms = 100, lifetime = 600) {
    return async (source: RefreshSource): Promise<GrantOutcome> => {
      counter.n += 1;
      counter.sources.push(source);
      const sentAt = Date.now();
      await redisClock.sleep(ms); // a grant in progress, overlapping the other processes' calls
      return {
        ok: true,
        grant: 'client_credentials',
        sentAt,
        tokenSet: {
          accessToken: `tok-${counter.n}`,
          tokenType: 'bearer',
          expiresInSeconds: lifetime,
          lifetimeDefaulted: false,
          refreshToken: `rt-${counter.n}`,
        },
      };
    };
  }

  it('three processes at once: one grant, two adopt the same generation', async () => {
    const counter = { n: 0, sources: [] as RefreshSource[] };
    const fleet = [
      coordinator(fleetConnection()),
      coordinator(fleetConnection()),
      coordinator(fleetConnection()),
    ];
    const results = await Promise.all(
      fleet.map((c) => c.obtain({ held: undefined }, granter(counter, 300))),
    );
    expect(counter.n).toBe(1);
    expect(results.map((r) => r.kind).sort()).toEqual(['adopted', 'adopted', 'granted']);
    for (const r of results) if (r.kind === 'adopted') expect(r.tokenSet.accessToken).toBe('tok-1');
    expect(fleet.map((c) => c.status().generation)).toEqual([1, 1, 1]);
  });

  it('the lease holder renews with the shared refresh token; a process holding the current token renews', async () => {
    const counter = { n: 0, sources: [] as RefreshSource[] };
    const a = coordinator(fleetConnection());
    const first = await a.obtain({ held: undefined }, granter(counter));
    expect(first.kind).toBe('granted');
    const again = await a.obtain({ held: { accessToken: 'tok-1' } }, granter(counter));
    // Published: the refresh token is the fleet's, and this process keeps no private copy of it.
    expect(again).toMatchObject({ kind: 'granted', refreshToken: undefined, shared: true });
    expect(counter.sources).toEqual([
      { kind: 'shared', refreshToken: undefined },
      { kind: 'shared', refreshToken: 'rt-1' },
    ]);
  });

  it('a 401 deletes the entry once; a second process with the same rejected token adopts the new one', async () => {
    const counter = { n: 0, sources: [] as RefreshSource[] };
    const a = coordinator(fleetConnection());
    const b = coordinator(fleetConnection());
    await a.obtain({ held: undefined }, granter(counter));
    const renewed = await a.obtain({ held: undefined, rejectedToken: 'tok-1' }, granter(counter));
    expect(renewed.kind).toBe('granted');
    const other = await b.obtain({ held: undefined, rejectedToken: 'tok-1' }, granter(counter));
    expect(other).toMatchObject({
      kind: 'adopted',
      tokenSet: { accessToken: 'tok-2' },
      generation: 2,
    });
    expect(counter.n).toBe(2);
  });

  it('a follower whose holder dies gets lease-lost after one lease TTL, then takes the lease', async () => {
    const counter = { n: 0, sources: [] as RefreshSource[] };
    const dead = tokenStore(fleetConnection());
    await dead.takeLease(settings.timeoutMs + 2_000); // a holder that never publishes
    const b = coordinator(fleetConnection());
    const waited = await b.obtain({ held: undefined }, granter(counter));
    expect(waited.kind).toBe('lease-lost');
    expect(counter.n).toBe(0);
    expect((await b.obtain({ held: undefined }, granter(counter))).kind).toBe('granted');
  });

  it('a follower whose own token expires before the late holder publishes renews alone then, not after the lease', async () => {
    const counter = { n: 0, sources: [] as RefreshSource[] };
    const stuck = tokenStore(fleetConnection());
    await stuck.takeLease(10_000); // a holder that is late (its endpoint hangs) or gone
    const b = coordinator(fleetConnection());
    const started = Date.now();
    const held = { accessToken: 'tok-held', expiresAt: started + 800 };
    const result = await b.obtain({ held }, granter(counter, 10));
    expect(result).toMatchObject({ kind: 'granted', shared: false });
    expect(counter.sources).toEqual([{ kind: 'local' }]);
    // At the held token's expiry, not after the 10 s lease: the stuck holder still has it.
    expect((await stuck.read()).leaseHeld).toBe(true);
  });

  it('a follower whose token has already expired waits for the holder as before (no grant of its own in an outage)', async () => {
    const counter = { n: 0, sources: [] as RefreshSource[] };
    const holder = tokenStore(fleetConnection());
    // The fleet's one attempt, still running; its holder leaves without publishing after the
    // follower has polled three times.
    const { lease } = await holder.takeLease(settings.timeoutMs + 2_000);
    let polls = 0;
    const b = coordinator(fleetConnection(), 0, async () => {
      polls += 1;
      if (polls === 4) await holder.release(lease!);
    });
    const held = { accessToken: 'tok-expired', expiresAt: Date.now() - 1_000 };
    const result = await b.obtain({ held }, granter(counter, 10));
    expect(result.kind).toBe('lease-lost');
    expect(polls).toBe(4);
    expect(counter.n).toBe(0);
  });

  it('falls back to a local grant when the store is down', async () => {
    const counter = { n: 0, sources: [] as RefreshSource[] };
    const c = coordinator(storeConnection('redis://127.0.0.1:1'));
    const result = await c.obtain({ held: undefined }, granter(counter, 10));
    expect(result).toMatchObject({ kind: 'granted', shared: false });
    expect(counter.sources).toEqual([{ kind: 'local' }]);
    expect(c.status()).toMatchObject({ url: 'redis://127.0.0.1:1', up: false });
  });

  it('does not adopt a set that is itself due for renewal', async () => {
    const counter = { n: 0, sources: [] as RefreshSource[] };
    const a = coordinator(fleetConnection());
    // 4 s lifetime: due at half of it; a fresh process 2.1 s later renews instead of adopting.
    await a.obtain({ held: undefined }, granter(counter, 10, 4));
    const b = coordinator(fleetConnection(), 2_100);
    expect((await b.obtain({ held: undefined }, granter(counter, 10, 4))).kind).toBe('granted');
  });
});
