/**
 * The shared cache tier's scripts and sealing against a real redis-server: what a member writes,
 * the others read; what the store says is checked (another secret, no expiry, a rollback, a
 * lease held for ever, an invalidated path).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../clock.js';
import { createLogger } from '../telemetry/logger.js';
import {
  startRedisServer,
  TEST_STORE_COMMAND_TIMEOUT_MS,
  type RedisServer,
} from '../../test/helpers/redis-server.js';
import { createStoreCache, type StoreCache, CACHE_SCRIPTS } from './cache-entries.js';
import { createStoreConnection, type StoreConnection } from './connection.js';
import type { SharedAnswer } from './ports.js';

const logger = createLogger({ level: 'silent' });
let redis: RedisServer;
const connections: StoreConnection[] = [];

/** Every script reply the members got, as JSON. */
const replies: string[] = [];

function member(
  options: { secret?: string; now?: () => number; leaseTtlMs?: number } = {},
): StoreCache {
  const connection = createStoreConnection({
    url: redis.url,
    logger,
    clock: systemClock,
    commandTimeoutMs: TEST_STORE_COMMAND_TIMEOUT_MS,
    scripts: CACHE_SCRIPTS,
  });
  connections.push(connection);
  return createStoreCache({
    connection: {
      health: () => connection.health(),
      async runScript(...args) {
        const reply = await connection.runScript(...args);
        replies.push(JSON.stringify(reply));
        return reply;
      },
    },
    keyPrefix: 'oauth-sidecar:',
    tokenUrl: 'https://auth.example/o/token/',
    readIdentity: () =>
      Promise.resolve({ clientId: 'client', clientSecret: options.secret ?? 'secret-one' }),
    maxEntryBytes: 256 * 1024,
    leaseTtlMs: options.leaseTtlMs ?? 60_000,
    now: options.now ?? Date.now,
  });
}

function answer(body: string, freshMs = 60_000): SharedAnswer {
  return {
    headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
    body: Buffer.from(body),
    freshMs,
    staleIfErrorMs: 3_600_000,
    staleWhileRevalidateMs: 0,
    vary: ['accept-language'],
    varyValues: ['de'],
  };
}

let n = 0;
/** A cache key and path of their own per test. */
function question() {
  n += 1;
  const path = `/v1.0/contracts/q${n}`;
  return { path, key: `${path}?month=2026-12\napplication/json\ngzip` };
}

beforeAll(async () => {
  redis = await startRedisServer();
});

afterAll(async () => {
  await Promise.all(connections.map((c) => c.close()));
  await redis.close();
});

describe('the shared cache tier in the store (real redis-server)', () => {
  it('one member takes the fill lease, another waits; the entry written is read by all', async () => {
    const [one, two] = [member(), member()];
    const { key, path } = question();
    const first = await one.read(key, path, true);
    expect(first).toMatchObject({ answer: undefined, lease: 'taken', generation: '0' });
    expect((await two.read(key, path, true)).lease).toBe('held');
    await one.write(key, path, answer('{"price":42}'), first.generation);
    const read = await two.read(key, path, true);
    expect(read.lease).toBe('none'); // fresh: nobody needs the lease
    expect(read.answer?.body.toString()).toBe('{"price":42}');
    expect(read.answer).toMatchObject({
      freshMs: 60_000,
      staleIfErrorMs: 3_600_000,
      vary: ['accept-language'],
      varyValues: ['de'],
    });
    expect(read.ageMs).toBeGreaterThanOrEqual(0);
    expect(read.ageMs).toBeLessThan(5_000);
    // The write gave the lease back.
    const keys = await one.keysOf(key, path);
    expect(await redis.command('EXISTS', keys.lease)).toContain(':0');
  });

  it('keeps no path, query or body in clear; a value sealed under another secret is a miss', async () => {
    const [one, other] = [member(), member({ secret: 'secret-two' })];
    const { key, path } = question();
    await one.write(key, path, answer('{"secret-body":"s3cr3t-payload"}'), '0');
    const dump = [...(await redis.dump()).entries()].flat().join('\n');
    for (const clear of [
      path,
      'month=2026-12',
      's3cr3t-payload',
      'secret-one',
      'accept-language',
    ]) {
      expect(dump).not.toContain(clear);
    }
    // Names differ under another secret; and the value itself, put where it would look, does not open.
    const mine = await one.keysOf(key, path);
    const theirs = await other.keysOf(key, path);
    expect(theirs.entry).not.toBe(mine.entry);
    expect((await other.read(key, path, false)).answer).toBeUndefined();
    const raw = await redis.command('GET', mine.entry);
    const value = raw.split('\r\n')[1]!;
    await redis.command('SET', theirs.entry, value, 'PX', '60000');
    expect((await other.read(key, path, false)).answer).toBeUndefined();
    // Moved to another key of the same secret, it does not open either (the name is bound in).
    const elsewhere = await one.keysOf(`${key}x`, path);
    await redis.command('SET', elsewhere.entry, value, 'PX', '60000');
    expect((await one.read(`${key}x`, path, false)).answer).toBeUndefined();
  });

  it('an entry without expiry, with a longer one, or written long ago (a restore) is a miss', async () => {
    const { key, path } = question();
    const writer = member();
    await writer.write(key, path, answer('{"v":1}', 60_000), '0');
    const { entry } = await writer.keysOf(key, path);
    expect((await writer.read(key, path, false)).answer).toBeDefined();
    await redis.command('PERSIST', entry);
    expect((await writer.read(key, path, false)).answer).toBeUndefined();
    await redis.command('PEXPIRE', entry, String(10 * 3_600_000));
    expect((await writer.read(key, path, false)).answer).toBeUndefined();
    // Written (by its writer's clock) two days ago and put back with a fresh expiry.
    const old = member({ now: () => Date.now() - 2 * 86_400_000 });
    await old.write(key, path, answer('{"v":0}', 60_000), '0');
    expect((await writer.read(key, path, false)).answer).toBeUndefined();
  });

  it('invalidating a path makes every entry of it a miss, and an older fill is not written', async () => {
    const one = member();
    const { key, path } = question();
    const before = await one.read(key, path, true);
    await one.write(key, path, answer('{"v":1}'), before.generation);
    await one.invalidate(path);
    const after = await one.read(key, path, true);
    expect(after.answer).toBeUndefined();
    expect(after.generation).toBe('1');
    // A fill that began before the invalidation is not written.
    await one.write(key, path, answer('{"v":2}'), before.generation);
    expect((await one.read(key, path, false)).answer).toBeUndefined();
    await one.write(key, path, answer('{"v":3}'), after.generation);
    expect((await one.read(key, path, false)).answer?.body.toString()).toBe('{"v":3}');
  });

  it('a lease held for ever by someone else is cut to the lease TTL', async () => {
    const one = member({ leaseTtlMs: 5_000 });
    const { key, path } = question();
    const { lease } = await one.keysOf(key, path);
    await redis.command('SET', lease, 'a-member-that-died');
    expect((await one.read(key, path, true)).lease).toBe('held');
    const ttl = Number((await redis.command('PTTL', lease)).slice(1));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5_000);
  });

  it('keys of the wrong type are misses (never a store error) that the next fill replaces', async () => {
    const one = member();
    const { key, path } = question();
    const keys = await one.keysOf(key, path);
    await redis.command('HSET', keys.entry, 'forged', 'x');
    await redis.command('RPUSH', keys.generation, 'forged');
    await redis.command('SADD', keys.lease, 'forged');
    const read = await one.read(key, path, true);
    expect(read).toMatchObject({ answer: undefined, generation: '0', lease: 'taken' });
    await one.write(key, path, answer('{"v":1}'), read.generation);
    expect((await one.read(key, path, true)).answer?.body.toString()).toBe('{"v":1}');
    // A generation of the wrong type reads as none; the next invalidation replaces it.
    await one.invalidate(path);
    expect(await redis.command('GET', keys.generation)).toBe('$1\r\n1\r\n');
  });

  it('a value larger than an entry can be is a miss and never leaves the store', async () => {
    const one = member();
    const { key, path } = question();
    const { entry } = await one.keysOf(key, path);
    // Over cache.maxSharedEntryBytes sealed: the reply carries none of it.
    const big = `c1.0.60000.60000.${Date.now()}.${'A'.repeat(1024 * 1024)}`;
    await redis.command('SET', entry, big, 'PX', '60000');
    replies.length = 0;
    const read = await one.read(key, path, true);
    expect(read).toMatchObject({ answer: undefined, lease: 'taken' });
    expect(replies.map((reply) => reply.length)).toEqual([expect.any(Number)]);
    expect(replies[0]!.length).toBeLessThan(1_000);
    await one.write(key, path, answer('{"v":2}'), read.generation);
    expect((await one.read(key, path, false)).answer?.body.toString()).toBe('{"v":2}');
  });

  it("its holder renews the lease; once it is another member's, renewing says so", async () => {
    const [one, two] = [member({ leaseTtlMs: 1_000 }), member({ leaseTtlMs: 1_000 })];
    const { key, path } = question();
    const { lease } = await one.keysOf(key, path);
    expect((await one.read(key, path, true)).lease).toBe('taken');
    await redis.command('PEXPIRE', lease, '100');
    expect(await one.renew(key)).toBe(true);
    expect(Number((await redis.command('PTTL', lease)).slice(1))).toBeGreaterThan(500);
    await redis.command('DEL', lease);
    expect((await two.read(key, path, true)).lease).toBe('taken');
    expect(await one.renew(key)).toBe(false);
    expect((await one.read(key, path, true)).lease).toBe('held');
  });

  it('gives back only its own lease', async () => {
    const [one, two] = [member(), member()];
    const { key, path } = question();
    expect((await one.read(key, path, true)).lease).toBe('taken');
    await two.release(key);
    expect((await two.read(key, path, true)).lease).toBe('held');
    await one.release(key);
    expect((await two.read(key, path, true)).lease).toBe('taken');
  });

  it('a full store with noeviction refuses writes and lease-taking reads (the cache goes on without it)', async () => {
    const one = member();
    const { key, path } = question();
    await redis.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    await redis.command('CONFIG', 'SET', 'maxmemory', '1');
    try {
      await expect(one.write(key, path, answer('{"v":1}'), '0')).rejects.toThrow(/OOM/);
      await expect(one.read(key, path, true)).rejects.toThrow(/OOM/);
    } finally {
      await redis.command('CONFIG', 'SET', 'maxmemory', '0');
    }
    expect((await one.read(key, path, true)).lease).toBe('taken');
  });
});
