import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../clock.js';
import { createLogger } from '../telemetry/logger.js';
import {
  startRedisServer,
  TEST_STORE_COMMAND_TIMEOUT_MS,
  type RedisServer,
} from '../../test/helpers/redis-server.js';
import { waitFor } from '../../test/helpers/wait.js';
import { createStoreConnection, type StoreConnection } from './connection.js';
import { createStoreQuota, QUOTA_SCRIPTS } from './quota.js';

const logger = createLogger({ level: 'silent' });

/** One caller (the default one) asking for `n` slots. */
function want(
  n: number,
  caller = 'default',
  weight = 1,
  priority: 'interactive' | 'batch' = 'interactive',
) {
  return [{ caller, weight, priority, want: n }];
}
let redis: RedisServer;
const connections: StoreConnection[] = [];

function connect(): StoreConnection {
  const connection = createStoreConnection({
    url: redis.url,
    logger,
    clock: systemClock,
    commandTimeoutMs: TEST_STORE_COMMAND_TIMEOUT_MS,
    scripts: QUOTA_SCRIPTS,
  });
  connections.push(connection);
  return connection;
}

beforeAll(async () => {
  redis = await startRedisServer();
});

afterAll(async () => {
  await Promise.all(connections.map((c) => c.close()));
  await redis.close();
});

describe('store quota (real redis-server)', () => {
  it('two processes share one bucket: their grants sum to the bucket', async () => {
    const options = {
      keyPrefix: 'test-a:',
      upstream: 'https://api.example',
      rateLimit: { count: 5, periodMs: 60_000 },
    };
    const one = createStoreQuota({ connection: connect(), maxCooldownMs: 300_000, ...options });
    const two = createStoreQuota({ connection: connect(), maxCooldownMs: 300_000, ...options });
    const a = await one.take(want(3));
    const b = await two.take(want(3));
    expect(a).toMatchObject({ granted: 3, waitMs: 0, cooldown: undefined });
    expect(a.tokens).toBeGreaterThanOrEqual(2);
    expect(a.tokens).toBeLessThan(2.1);
    expect(b.granted).toBe(2);
    expect(b.tokens).toBeLessThan(0.1);
    // one slot every 12 s, on the store's clock
    expect(b.waitMs).toBeGreaterThan(11_000);
    expect(b.waitMs).toBeLessThanOrEqual(12_000);
    expect((await one.take(want(1))).granted).toBe(0);
  });

  it('refills evenly on the store clock', async () => {
    const quota = createStoreQuota({
      connection: connect(),
      maxCooldownMs: 300_000,
      keyPrefix: 'test-b:',
      upstream: 'https://api.example',
      rateLimit: { count: 10, periodMs: 1_000 },
    });
    expect((await quota.take(want(10))).granted).toBe(10);
    const empty = await quota.take(want(1));
    expect(empty.granted).toBe(0);
    expect(empty.waitMs).toBeGreaterThan(0);
    expect(empty.waitMs).toBeLessThanOrEqual(100);
    // The refill runs on the redis-server's clock: ask until a slot is there.
    await waitFor(async () => (await quota.take(want(1))).granted === 1, 10_000, 'a slot refilled');
  });

  it('a cooldown started by one is seen by the other, is never shortened, and blocks the bucket', async () => {
    const options = {
      keyPrefix: 'test-c:',
      upstream: 'https://api.example',
      rateLimit: { count: 5, periodMs: 1_000 },
    };
    const one = createStoreQuota({ connection: connect(), maxCooldownMs: 300_000, ...options });
    const two = createStoreQuota({ connection: connect(), maxCooldownMs: 300_000, ...options });
    expect(await two.readCooldown()).toBeUndefined();
    await one.startCooldown(429, 30_000);
    await one.startCooldown(503, 5_000);
    const seen = await two.readCooldown();
    expect(seen?.status).toBe(429);
    expect(seen?.msLeft).toBeGreaterThan(29_000);
    const during = await two.take(want(1));
    expect(during.granted).toBe(0);
    expect(during.cooldown?.status).toBe(429);
    await one.startCooldown(503, 60_000);
    expect((await two.readCooldown())?.status).toBe(503);
  });

  it('keys hold the prefix and a hash, never the upstream URL', async () => {
    const quota = createStoreQuota({
      connection: connect(),
      maxCooldownMs: 300_000,
      keyPrefix: 'test-d:',
      upstream: 'https://secret-host.example',
      rateLimit: { count: 1, periodMs: 1_000 },
    });
    await quota.take(want(1));
    await quota.startCooldown(503, 1_000);
    const keys = [...(await redis.dump()).keys()].filter((k) => k.startsWith('test-d:'));
    expect(keys.sort()).toEqual(
      [quota.keys.bucket, quota.keys.callers, quota.keys.cooldown].sort(),
    );
    expect(keys.join()).not.toContain('secret-host');
  });

  it('keys of the wrong type are absent (never a store error) and replaced', async () => {
    const quota = createStoreQuota({
      connection: connect(),
      maxCooldownMs: 300_000,
      keyPrefix: 'test-w:',
      upstream: 'https://api.example',
      rateLimit: { count: 2, periodMs: 60_000 },
    });
    for (const key of Object.values(quota.keys)) await redis.command('SET', key, 'forged');
    expect(await quota.readCooldown()).toBeUndefined();
    expect((await quota.take(want(1))).granted).toBe(1);
    await redis.command('SET', quota.keys.cooldown, 'forged');
    await quota.startCooldown(503, 5_000);
    expect((await quota.readCooldown())?.status).toBe(503);
  });

  it('a cooldown read from the store is capped by the reader, cut in the store, and ends', async () => {
    const quota = createStoreQuota({
      connection: connect(),
      maxCooldownMs: 2_000,
      keyPrefix: 'test-e:',
      upstream: 'https://api.example',
      rateLimit: { count: 5, periodMs: 1_000 },
    });
    const now = Date.now();
    // Forged: 30 days, no expiry; and a non-numeric status next to it.
    await redis.command(
      'HSET',
      quota.keys.cooldown,
      'until',
      String(now + 2_592_000_000),
      'status',
      '503',
    );
    const read = await quota.readCooldown();
    expect(read?.status).toBe(503);
    expect(read!.msLeft).toBeLessThanOrEqual(2_000);
    const ttl = Number(/:(-?\d+)/.exec(await redis.command('PTTL', quota.keys.cooldown))?.[1]);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(3_000);
    const taken = await quota.take(want(1));
    expect(taken.granted).toBe(0);
    expect(taken.cooldown!.msLeft).toBeLessThanOrEqual(2_000);
    await redis.command(
      'HSET',
      quota.keys.cooldown,
      'until',
      String(now + 60_000),
      'status',
      '999',
    );
    expect(await quota.readCooldown()).toBeUndefined();
    await redis.command('DEL', quota.keys.cooldown);
  });

  it('a bucket timestamp ahead of the store clock is read as now', async () => {
    const quota = createStoreQuota({
      connection: connect(),
      maxCooldownMs: 300_000,
      keyPrefix: 'test-f:',
      upstream: 'https://api.example',
      rateLimit: { count: 20, periodMs: 1_000 },
    });
    await redis.command(
      'HSET',
      quota.keys.bucket,
      'tokens',
      '0',
      'ts',
      String(Date.now() + 60_000),
    );
    const first = await quota.take(want(1));
    expect(first.granted).toBe(0);
    expect(first.waitMs).toBeLessThanOrEqual(50);
    // Refilling from now: a slot within one interval (50 ms), not after the 60 s ahead.
    const deadline = Date.now() + 1_000;
    let granted = 0;
    while (granted === 0 && Date.now() < deadline) granted = (await quota.take(want(1))).granted;
    expect(granted).toBe(1);
  });

  describe('fair share between callers, fleet-wide', () => {
    const rateLimit = { count: 100, periodMs: 1_000 };
    function member(prefix: string, limit = rateLimit) {
      return createStoreQuota({
        connection: connect(),
        maxCooldownMs: 300_000,
        keyPrefix: prefix,
        upstream: 'https://api.example',
        rateLimit: limit,
      });
    }

    it('two members whose batch callers of weights 3 and 1 both keep asking split the slots 3:1 (± 20 %)', async () => {
      const [one, two] = [member('fair-a:'), member('fair-a:')];
      // Both start asking with the bucket empty: the steady state, not who came first to a full one.
      await one.take(want(100, 'warm-up'));
      let big = 0;
      let small = 0;
      // Counted over 150 slots the store's clock refilled (not over a span of this process's).
      await waitFor(
        async () => {
          big += (await one.take(want(30, 'big', 3, 'batch'))).granted;
          small += (await two.take(want(30, 'small', 1, 'batch'))).granted;
          return big + small >= 150;
        },
        30_000,
        '150 slots taken',
        { everyMs: 5 },
      );
      const ratio = big / small;
      expect(ratio).toBeGreaterThanOrEqual(2.4);
      expect(ratio).toBeLessThanOrEqual(3.6);
    });

    it("a member behind another member's caller is told when its turn comes, not the next slot", async () => {
      // docs/capacity.md "The first wall": W members asking at every slot cost W decisions per
      // slot. One slot every 10 s (a stall of the test process refills nothing); 3 to start with.
      const slow = { count: 3, periodMs: 30_000 };
      const [a, b, c] = [member('fair-t:', slow), member('fair-t:', slow), member('fair-t:', slow)];
      expect((await a.take(want(2, 'alpha'))).granted).toBe(2);
      expect((await b.take(want(3, 'bravo'))).granted).toBe(1);
      // charlie has had nothing: it is ahead of alpha for the next slot.
      expect((await c.take(want(3, 'charlie'))).granted).toBe(0);
      const behind = await a.take(want(3, 'alpha'));
      expect(behind.granted).toBe(0);
      // The next slot (in ~10 s) is charlie's; alpha's is the one after (~20 s).
      expect(behind.waitMs).toBeGreaterThan(15_000);
      expect(behind.waitMs).toBeLessThanOrEqual(20_000);
      // charlie itself is told the next slot.
      expect((await c.take(want(3, 'charlie'))).waitMs).toBeLessThanOrEqual(10_000);
    });

    it("a slot due to another member's interactive caller stays in the bucket for it", async () => {
      // One slot a second: a stall of the test process between two takes refills nothing.
      const slow = { count: 100, periodMs: 100_000 };
      const [ui, batch] = [member('fair-b:', slow), member('fair-b:', slow)];
      // The batch caller empties the bucket; the interactive one then asks and must wait.
      expect((await batch.take(want(100, 'nightly', 1, 'batch'))).granted).toBeGreaterThan(90);
      await batch.take(want(100, 'nightly', 1, 'batch'));
      const waiting = await ui.take(want(1, 'ui'));
      expect(waiting.granted).toBe(0);
      // Until the slot is due (on the store's clock) and after: the batch member asks first each
      // time and gets nothing; the slot is held for the interactive caller, who gets it.
      await waitFor(
        async () => {
          const held = await batch.take(want(100, 'nightly', 1, 'batch'));
          expect(held.granted).toBe(0);
          expect(held.waitMs).toBeGreaterThan(0);
          return (await ui.take(want(1, 'ui'))).granted === 1;
        },
        10_000,
        'the slot given to the interactive caller',
      );
    });

    it('what the callers hash says is checked: garbage dropped, virtual times clamped, at most 256 callers', async () => {
      const quota = member('fair-c:');
      await quota.take(want(1, 'real'));
      const forged = ['~v', 'NaN', 'nan', 'x,y', 'ahead', '1e300,1,0,' + Date.now() + ',5'];
      forged.push(
        'heavy',
        `0,1000000000,0,${Date.now()},5`,
        'future',
        `0,1,0,${Date.now() + 60_000},5`,
      );
      for (let i = 0; i < 400; i++) forged.push(`flood-${i}`, `0,1,1,${Date.now()},0`);
      await redis.command('HSET', quota.keys.callers, ...forged);
      // A caller far ahead (1e300) would never be served again; a weight of 1e9 and a time in the
      // future are dropped; the fleet's virtual time NaN reads as 0.
      const taken = await quota.take(want(5, 'real'));
      expect(taken.granted).toBe(5);
      const left = await redis.command('HLEN', quota.keys.callers);
      expect(Number(left.replace(/^:/, ''))).toBeLessThanOrEqual(258);
      const ahead = await redis.command('HGET', quota.keys.callers, 'ahead');
      expect(ahead).not.toContain('1e+300');
    });
  });

  describe('leased batches (docs/capacity.md "Leased batches")', () => {
    // 100 slots, one every 10 s: a stall of the test process refills nothing the counts see.
    const plenty = { count: 100, periodMs: 1_000_000 };
    function member(prefix: string) {
      return createStoreQuota({
        connection: connect(),
        maxCooldownMs: 300_000,
        keyPrefix: prefix,
        upstream: 'https://api.example',
        rateLimit: plenty,
      });
    }
    function ask(n: number, lease: number, caller = 'default') {
      return [{ caller, weight: 1, priority: 'interactive' as const, want: n, lease }];
    }
    /** The want the store keeps for `caller` (its 5th field), for the rest of the fleet. */
    async function storedWant(quota: ReturnType<typeof member>, caller: string): Promise<number> {
      const raw = await redis.command('HGET', quota.keys.callers, caller);
      return Number(raw.split(',')[4]);
    }

    it('a plentiful bucket grants the waiters and the batch; the fleet sees only the waiters', async () => {
      const quota = member('lease-a:');
      const taken = await quota.take(ask(2, 10, 'alpha'));
      expect(taken.granted).toBe(12);
      expect(taken.grants).toEqual([12]);
      expect(taken.tokens).toBeLessThan(88.1);
      // Nothing is left wanted: other members are never held back for a batch.
      expect(await storedWant(quota, 'alpha')).toBe(0);
    });

    it('a batch never takes the bucket below half: a scarce bucket decides slot by slot', async () => {
      const quota = member('lease-b:');
      // 1 + 49 (down to the reserve of 50), though 60 were asked.
      expect((await quota.take(ask(1, 60))).granted).toBe(50);
      // At the reserve: the waiters only, as without leases.
      expect((await quota.take(ask(3, 60))).granted).toBe(3);
      expect((await quota.take(ask(47, 60))).granted).toBe(47);
      const empty = await quota.take(ask(1, 60));
      expect(empty.granted).toBe(0);
      expect(empty.waitMs).toBeGreaterThan(0);
    });

    it("no batch while another member's caller is waiting: its slot stays in the bucket", async () => {
      const quota = member('lease-c:');
      // Another member's caller, bravo, waits for 5 slots (as its member's take left it; a full
      // bucket and a waiter at once come from a refill, which the store's clock would need seconds for).
      await redis.command('HSET', quota.keys.callers, 'bravo', `0,1,0,${Date.now() - 10},5`);
      const held = await quota.take(ask(1, 30, 'alpha'));
      // alpha's own waiter is served (first by name at an equal virtual time); bravo is next: no batch.
      expect(held.granted).toBe(1);
      expect(held.waitMs).toBeGreaterThan(0);
      expect(held.tokens).toBeGreaterThan(98);
    });

    it('two members taking batches in turn stay within one batch of each other', async () => {
      const [one, two] = [member('lease-d:'), member('lease-d:')];
      const batch = 8;
      let a = 0;
      let b = 0;
      // Both keep asking one slot and a batch each turn, well past the reserve and the bucket.
      for (let turn = 0; turn < 40; turn++) {
        a += (await one.take(ask(1, batch, 'alpha'))).granted;
        b += (await two.take(ask(1, batch, 'bravo'))).granted;
        expect(Math.abs(a - b)).toBeLessThanOrEqual(batch + 1);
      }
      // The whole bucket was taken, never more: 50 in batches and waiters, then one at a time.
      expect(a + b).toBeGreaterThanOrEqual(99);
      expect(a + b).toBeLessThanOrEqual(101);
    });

    it('during a cooldown a batch is not granted either', async () => {
      const quota = member('lease-e:');
      await quota.startCooldown(429, 60_000);
      const taken = await quota.take(ask(1, 10));
      expect(taken.granted).toBe(0);
      expect(taken.cooldown?.status).toBe(429);
    });
  });
});
