import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../clock.js';
import { SidecarError } from '../../errors.js';
import { createLogger } from '../../telemetry/logger.js';
import {
  QuotaGuard,
  type QuotaGuardOptions,
  type SharedCooldown,
  type SharedDecision,
  type SharedQuota,
} from './guard.js';
import { Callers } from './callers.js';
import { LEASE_MS } from './lease.js';

const logger = createLogger({ level: 'silent' });

/** A store whose health follows its calls, as fleet/connection.ts's does (the one health). */
function connected(calls: Omit<SharedQuota, 'health'>): SharedQuota {
  let up = true;
  let lastError: { message: string; at: string } | null = null;
  const track = <T>(call: Promise<T>): Promise<T> =>
    call.then(
      (value) => {
        up = true;
        return value;
      },
      (err: unknown) => {
        up = false;
        lastError = { message: (err as Error).message, at: '' };
        throw err;
      },
    );
  return {
    take: (demands) => track(calls.take(demands)),
    startCooldown: (status, ms) => track(calls.startCooldown(status, ms)),
    readCooldown: () => track(calls.readCooldown()),
    health: () => ({ up, connecting: false, lastError }),
  };
}

function makeGuard(options: Partial<QuotaGuardOptions> = {}) {
  const waits: number[] = [];
  const guard = new QuotaGuard({
    rateLimit: undefined,
    queueMs: 2_000,
    maxCooldownSeconds: 300,
    clock: systemClock,
    metrics: {
      rateLimitWait: { observe: (_labels, s) => waits.push(s) },
      quotaRequests: { inc: () => undefined },
    },
    logger,
    ...options,
  });
  return { guard, waits };
}

function refusal(fn: () => unknown): SidecarError {
  try {
    fn();
  } catch (err) {
    if (err instanceof SidecarError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

/** Settle state of a promise without awaiting it forever. */
function track(promise: Promise<void>) {
  const state: { value: 'pending' | 'granted' | 'rejected'; reason?: unknown } = {
    value: 'pending',
  };
  promise.then(
    () => (state.value = 'granted'),
    (reason: unknown) => {
      state.value = 'rejected';
      state.reason = reason;
    },
  );
  return state;
}

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-11-23T01:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('cooldown', () => {
  it('a 429 with Retry-After seconds refuses every request until then, with seconds left', () => {
    const { guard } = makeGuard();
    guard.observe(429, { 'retry-after': '30' });
    const err = refusal(() => guard.admit());
    expect(err.code).toBe('upstream_rate_limited');
    expect(err.status).toBe(429);
    expect(err.retryAfterSeconds).toBe(30);
    vi.advanceTimersByTime(10_500);
    expect(refusal(() => guard.admit()).retryAfterSeconds).toBe(20);
    vi.advanceTimersByTime(19_000);
    expect(refusal(() => guard.admit()).retryAfterSeconds).toBe(1);
    vi.advanceTimersByTime(500);
    expect(guard.admit()).toBeUndefined();
    expect(guard.cooldownSecondsLeft()).toBe(0);
  });

  it('a 429 with an HTTP date', () => {
    const { guard } = makeGuard();
    guard.observe(429, {
      'retry-after': 'Mon, 23 Nov 2026 01:01:00 GMT',
      date: 'Mon, 23 Nov 2026 01:00:00 GMT',
    });
    expect(refusal(() => guard.admit()).retryAfterSeconds).toBe(60);
    expect(guard.cooldownSecondsLeft()).toBe(60);
  });

  it('a replayed old 503 (Date an hour old, Age 3600) starts no cooldown', () => {
    const { guard } = makeGuard();
    const hourAgo = Date.now() - 3_600_000;
    guard.observe(503, {
      'retry-after': new Date(hourAgo + 120_000).toUTCString(),
      date: new Date(hourAgo).toUTCString(),
      age: '3600',
    });
    expect(guard.admit()).toBeUndefined();
    expect(guard.cooldownSecondsLeft()).toBe(0);
  });

  it.each([
    ['a normal Date', 0],
    ['a Date 60 s behind', -60_000],
    ['a Date 30 s ahead', 30_000],
    ['no Date', undefined],
  ])('Retry-After: 2 with %s holds the cooldown 2 s from arrival', (_name, skew) => {
    const { guard } = makeGuard();
    // The answer's Date has one-second resolution: made 0.9 s into the second it names.
    vi.advanceTimersByTime(900);
    const date =
      skew === undefined ? {} : { date: new Date(Date.now() - 900 + skew).toUTCString() };
    guard.observe(503, { 'retry-after': '2', ...date });
    vi.advanceTimersByTime(1_999);
    expect(refusal(() => guard.admit()).code).toBe('upstream_unavailable');
    vi.advanceTimersByTime(1);
    expect(guard.admit()).toBeUndefined();
  });

  it('Retry-After less the Age a cache held the answer for', () => {
    const { guard } = makeGuard();
    guard.observe(429, { 'retry-after': '30', age: '25', date: new Date().toUTCString() });
    expect(refusal(() => guard.admit()).retryAfterSeconds).toBe(5);
    vi.advanceTimersByTime(5_000);
    expect(guard.admit()).toBeUndefined();
  });

  it('is capped at maxCooldownSeconds', () => {
    const { guard } = makeGuard({ maxCooldownSeconds: 5 });
    guard.observe(429, { 'retry-after': '86400' });
    expect(refusal(() => guard.admit()).retryAfterSeconds).toBe(5);
    vi.advanceTimersByTime(5_000);
    expect(guard.admit()).toBeUndefined();
  });

  it('a 503 with Retry-After refuses with 503 upstream_unavailable', () => {
    const { guard } = makeGuard();
    guard.observe(503, { 'retry-after': '3' });
    const err = refusal(() => guard.admit());
    expect(err.code).toBe('upstream_unavailable');
    expect(err.status).toBe(503);
    expect(err.retryAfterSeconds).toBe(3);
  });

  it('a 429 or 503 without a usable Retry-After, or any other status, starts none', () => {
    const { guard } = makeGuard();
    guard.observe(429, {});
    guard.observe(503, {});
    guard.observe(429, { 'retry-after': 'soon' });
    guard.observe(429, { 'retry-after': '0' });
    guard.observe(500, { 'retry-after': '30' });
    guard.observe(200, { 'retry-after': '30' });
    expect(guard.admit()).toBeUndefined();
    expect(guard.status().cooldown).toBeNull();
  });

  it('a later answer extends the cooldown, never shortens it', () => {
    const { guard } = makeGuard();
    guard.observe(429, { 'retry-after': '30' });
    guard.observe(503, { 'retry-after': '5' });
    expect(refusal(() => guard.admit()).code).toBe('upstream_rate_limited');
    guard.observe(503, { 'retry-after': '60' });
    const err = refusal(() => guard.admit());
    expect(err.code).toBe('upstream_unavailable');
    expect(err.retryAfterSeconds).toBe(60);
  });

  it('refuses requests already waiting for a slot when a cooldown starts', () => {
    const { guard } = makeGuard({ rateLimit: { count: 1, periodMs: 1_000 } });
    expect(guard.admit()).toBeUndefined();
    const waiting = track(guard.admit()!);
    guard.observe(429, { 'retry-after': '10' });
    return vi.waitFor(() => {
      expect(waiting.value).toBe('rejected');
      expect((waiting.reason as SidecarError).code).toBe('upstream_rate_limited');
    });
  });

  it('status shows it', () => {
    const { guard } = makeGuard();
    guard.observe(503, { 'retry-after': '2' });
    expect(guard.status().cooldown).toEqual({
      status: 503,
      secondsLeft: 2,
      until: '2026-11-23T01:00:02.000Z',
    });
  });
});

describe('rate limit', () => {
  it('without a limit admission is synchronous and allocation-free: undefined', () => {
    const { guard, waits } = makeGuard();
    for (let i = 0; i < 1000; i++) expect(guard.admit()).toBeUndefined();
    expect(waits).toEqual([]);
    expect(guard.status().rateLimit).toBeNull();
  });

  it('admits N at once, then one every period / N, in arrival order', async () => {
    const { guard, waits } = makeGuard({ rateLimit: { count: 2, periodMs: 1_000 } });
    expect(guard.admit()).toBeUndefined();
    expect(guard.admit()).toBeUndefined();
    const order: number[] = [];
    const pending = [1, 2, 3].map((i) => guard.admit()!.then(() => order.push(i)));
    await vi.advanceTimersByTimeAsync(499);
    expect(order).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(order).toEqual([1]);
    await vi.advanceTimersByTimeAsync(500);
    expect(order).toEqual([1, 2]);
    await vi.advanceTimersByTimeAsync(500);
    expect(order).toEqual([1, 2, 3]);
    await Promise.all(pending);
    expect(waits).toEqual([0, 0, 0.5, 1, 1.5]);
  });

  it('a newcomer waits behind the queue even when a slot has just refilled', async () => {
    const { guard } = makeGuard({ rateLimit: { count: 1, periodMs: 100 } });
    expect(guard.admit()).toBeUndefined();
    const first = track(guard.admit()!);
    vi.setSystemTime(Date.now() + 100); // the slot is due, but the pump has not run yet
    const second = guard.admit();
    expect(second).toBeInstanceOf(Promise);
    const late = track(second!);
    await vi.advanceTimersByTimeAsync(0);
    expect(first.value).toBe('granted');
    expect(late.value).toBe('pending');
    await vi.advanceTimersByTimeAsync(100);
    expect(late.value).toBe('granted');
  });

  it('refuses at once with 429 rate_limited when the wait would pass queueMs', () => {
    const { guard } = makeGuard({ rateLimit: { count: 1, periodMs: 1_000 }, queueMs: 2_000 });
    expect(guard.admit()).toBeUndefined();
    void guard.admit(); // slot at +1 s
    void guard.admit(); // slot at +2 s
    const err = refusal(() => guard.admit()); // +3 s > 2 s
    expect(err.code).toBe('rate_limited');
    expect(err.status).toBe(429);
    expect(err.retryAfterSeconds).toBe(3);
    expect(guard.status().rateLimit).toMatchObject({ queued: 2, tokens: 0 });
  });

  it('no request waits longer than queueMs', async () => {
    // The store estimate is optimistic: only the deadline bounds the wait then.
    const take = vi.fn((): Promise<SharedDecision> =>
      Promise.resolve({ granted: 0, grants: [0], waitMs: 100, tokens: 0, cooldown: undefined }),
    );
    const shared = connected({
      take,
      startCooldown: () => Promise.resolve(),
      readCooldown: () => Promise.resolve(undefined),
    });
    const { guard } = makeGuard({
      rateLimit: { count: 10, periodMs: 1_000 },
      queueMs: 300,
      shared,
    });
    const waiting = track(guard.admit()!);
    await vi.advanceTimersByTimeAsync(299);
    expect(waiting.value).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(waiting.value).toBe('rejected');
    expect((waiting.reason as SidecarError).code).toBe('rate_limited');
    expect(guard.status().rateLimit?.queued).toBe(0);
  });

  it('a client that leaves gives up its place at once; the one behind moves up', async () => {
    const { guard } = makeGuard({ rateLimit: { count: 1, periodMs: 1_000 }, queueMs: 2_000 });
    expect(guard.admit()).toBeUndefined();
    const leaving = new AbortController();
    const a = track(guard.admit(leaving.signal)!);
    const b = track(guard.admit()!);
    expect(() => guard.admit()).toThrow(SidecarError); // full: +3 s
    const gone = new Error('client gone');
    leaving.abort(gone);
    await vi.advanceTimersByTimeAsync(0);
    expect(a.value).toBe('rejected');
    expect(a.reason).toBe(gone);
    expect(guard.status().rateLimit?.queued).toBe(1);
    const c = track(guard.admit()!); // now fits: +2 s
    await vi.advanceTimersByTimeAsync(1_000);
    expect(b.value).toBe('granted');
    expect(c.value).toBe('pending');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(c.value).toBe('granted');
  });

  it('an already aborted signal is refused without queueing', async () => {
    const { guard } = makeGuard({ rateLimit: { count: 1, periodMs: 1_000 } });
    expect(guard.admit()).toBeUndefined();
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    await expect(guard.admit(controller.signal)).rejects.toThrow('gone');
    expect(guard.status().rateLimit?.queued).toBe(0);
  });

  it('the queue is bounded by maxQueued', () => {
    const { guard } = makeGuard({
      rateLimit: { count: 100, periodMs: 100 },
      queueMs: 60_000,
      maxQueued: 3,
    });
    for (let i = 0; i < 100; i++) expect(guard.admit()).toBeUndefined();
    for (let i = 0; i < 3; i++) void guard.admit();
    const err = refusal(() => guard.admit());
    expect(err.code).toBe('rate_limited');
    expect(err.message).toContain('queue is full');
  });

  it('holds N per period for a long run of arrivals (never more than the bucket allows)', async () => {
    const { guard } = makeGuard({ rateLimit: { count: 5, periodMs: 1_000 }, queueMs: 1_000 });
    const sent: number[] = [];
    const start = Date.now();
    for (let tick = 0; tick < 100; tick++) {
      for (let i = 0; i < 3; i++) {
        try {
          const wait = guard.admit();
          if (wait === undefined) sent.push(Date.now() - start);
          else
            wait.then(
              () => sent.push(Date.now() - start),
              () => undefined,
            );
        } catch {
          // refused: fine
        }
      }
      await vi.advanceTimersByTimeAsync(100);
    }
    // Any 1 s window holds at most the bucket (5) plus its refill (5); once the first burst is
    // spent (after 2 s), the refill alone plus the slot at the window's edge.
    for (const t of sent) {
      const inWindow = sent.filter((s) => s >= t && s < t + 1_000).length;
      expect(inWindow).toBeLessThanOrEqual(t >= 2_000 ? 6 : 10);
    }
    expect(sent.length).toBeLessThanOrEqual(5 + 10 * 5 + 1);
    expect(sent.length).toBeGreaterThanOrEqual(5 + 10 * 5 - 1);
  });
});

describe('fleet-wide (shared store)', () => {
  function fakeStore() {
    const state = {
      failing: false,
      tokens: 2,
      cooldown: undefined as SharedCooldown | undefined,
      calls: 0,
    };
    const shared = connected({
      take: (demands) => {
        const want = demands.reduce((sum, d) => sum + d.want, 0);
        state.calls += 1;
        if (state.failing) return Promise.reject(new Error('ECONNREFUSED'));
        if (state.cooldown)
          return Promise.resolve({
            granted: 0,
            grants: demands.map(() => 0),
            waitMs: 0,
            tokens: state.tokens,
            cooldown: state.cooldown,
          });
        const granted = Math.min(want, state.tokens);
        state.tokens -= granted;
        return Promise.resolve({
          granted,
          grants: [granted],
          waitMs: state.tokens > 0 ? 0 : 1_000,
          tokens: state.tokens,
          cooldown: undefined,
        });
      },
      startCooldown: (status, ms) => {
        if (state.failing) return Promise.reject(new Error('ECONNREFUSED'));
        state.cooldown = { status, msLeft: ms };
        return Promise.resolve();
      },
      readCooldown: () =>
        state.failing ? Promise.reject(new Error('ECONNREFUSED')) : Promise.resolve(state.cooldown),
    });
    return { state, shared };
  }

  it('slots come from the store', async () => {
    const { state, shared } = fakeStore();
    const { guard, waits } = makeGuard({ rateLimit: { count: 10, periodMs: 1_000 }, shared });
    const a = track(guard.admit()!);
    const b = track(guard.admit()!);
    const c = track(guard.admit()!);
    await vi.advanceTimersByTimeAsync(0);
    expect([a.value, b.value, c.value]).toEqual(['granted', 'granted', 'pending']);
    expect(state.calls).toBeGreaterThanOrEqual(1);
    expect(guard.status()).toMatchObject({ fleet: 'store', rateLimit: { tokens: 0, queued: 1 } });
    state.tokens = 1;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(c.value).toBe('granted');
    expect(waits.length).toBe(3);
  });

  it('a cooldown another process took applies here within one poll (250 ms)', async () => {
    const { state, shared } = fakeStore();
    const { guard } = makeGuard({ shared });
    guard.start();
    state.cooldown = { status: 503, msLeft: 10_000 };
    await vi.advanceTimersByTimeAsync(250);
    const err = refusal(() => guard.admit());
    expect(err.code).toBe('upstream_unavailable');
    expect(err.retryAfterSeconds).toBe(10);
    guard.close();
  });

  it('under a rate limit the poll reads nothing while the store is up: the next admission reads the cooldown', async () => {
    // docs/capacity.md: four reads a second per idle member on the quota's shard would be the
    // fleet's first wall; each store decision reads the cooldown in the same script.
    const { state, shared } = fakeStore();
    let reads = 0;
    const counted: SharedQuota = {
      ...shared,
      take: (demands) => shared.take(demands),
      health: () => shared.health(),
      readCooldown: () => {
        reads += 1;
        return shared.readCooldown();
      },
    };
    const { guard } = makeGuard({ rateLimit: { count: 10, periodMs: 1_000 }, shared: counted });
    guard.start();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(reads).toBe(0);
    state.cooldown = { status: 429, msLeft: 10_000 };
    const sent = track(guard.admit()!);
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.value).toBe('rejected');
    expect((sent.reason as SidecarError).code).toBe('upstream_rate_limited');
    // Applied here: the next request is refused without a store call.
    const calls = state.calls;
    expect(refusal(() => guard.admit()).code).toBe('upstream_rate_limited');
    expect(state.calls).toBe(calls);
    // With the store down the poll reads again (it is what finds the store back).
    state.failing = true;
    state.cooldown = undefined;
    await vi.advanceTimersByTimeAsync(10_000); // the cooldown is over
    expect(reads).toBe(0);
    track(guard.admit()!); // the store fails: the local bucket decides, the store is down
    await vi.advanceTimersByTimeAsync(1_000);
    expect(guard.status().fleet).toBe('local');
    expect(reads).toBeGreaterThan(0);
    guard.close();
  });

  it('a cooldown taken here is published to the store', async () => {
    const { state, shared } = fakeStore();
    const { guard } = makeGuard({ shared, maxCooldownSeconds: 20 });
    guard.observe(429, { 'retry-after': '60' });
    await vi.advanceTimersByTimeAsync(0);
    expect(state.cooldown).toEqual({ status: 429, msLeft: 20_000 });
  });

  it('with the store down, the process limits alone and says so; back when the store is', async () => {
    const { state, shared } = fakeStore();
    state.failing = true;
    const { guard } = makeGuard({ rateLimit: { count: 2, periodMs: 1_000 }, shared });
    guard.start();
    const a = track(guard.admit()!); // tries the store, fails over to the local bucket
    await vi.advanceTimersByTimeAsync(0);
    expect(a.value).toBe('granted');
    expect(guard.status()).toMatchObject({ fleet: 'local', storeError: 'ECONNREFUSED' });
    expect(guard.admit()).toBeUndefined(); // local bucket, synchronous
    expect(guard.admit()).toBeInstanceOf(Promise); // local bucket empty: waits
    state.failing = false;
    await vi.advanceTimersByTimeAsync(300); // the next poll finds the store
    expect(guard.status()).toMatchObject({ fleet: 'store', storeError: null });
    guard.close();
  });

  it("a store that hangs counts as down at the connection's bound (500 ms); the request is admitted locally", async () => {
    // fleet/connection.ts settles every call within 500 ms; the guard keeps no timer of its own.
    const noAnswer = <T>(): Promise<T> =>
      new Promise<T>((_, reject) => {
        setTimeout(() => reject(new Error('no answer within 500 ms')), 500);
      });
    const shared = connected({
      take: noAnswer,
      startCooldown: noAnswer,
      readCooldown: noAnswer,
    });
    // queueMs shorter than the store's bound: the deadline must not refuse what the store delayed.
    const { guard } = makeGuard({ rateLimit: { count: 2, periodMs: 1_000 }, queueMs: 200, shared });
    const a = track(guard.admit()!);
    await vi.advanceTimersByTimeAsync(499);
    expect(a.value).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(a.value).toBe('granted');
    expect(guard.status().fleet).toBe('local');
  });
});

describe('leased batches (docs/capacity.md "Leased batches")', () => {
  /** A store with a plentiful bucket that grants every want and every batch asked. */
  function leasingStore() {
    const state = {
      calls: 0,
      leases: [] as number[],
      cooldown: undefined as SharedCooldown | undefined,
    };
    const shared = connected({
      take: (demands) => {
        state.calls += 1;
        state.leases.push(...demands.map((d) => d.lease ?? 0));
        const grants = demands.map((d) => (state.cooldown ? 0 : d.want + (d.lease ?? 0)));
        return Promise.resolve({
          granted: grants.reduce((a, b) => a + b, 0),
          grants,
          waitMs: 0,
          tokens: 1_000,
          cooldown: state.cooldown,
        } satisfies SharedDecision);
      },
      startCooldown: () => Promise.resolve(),
      readCooldown: () => Promise.resolve(state.cooldown),
    });
    return { state, shared };
  }
  const rateLimit = { count: 1_000, periodMs: 1_000 };

  /** Admit one request and let its store decision (if any) settle. */
  async function admitOne(guard: QuotaGuard, caller?: ReturnType<QuotaGuard['callerOf']>) {
    const wait = guard.admit(undefined, caller);
    if (wait === undefined) return 'at once';
    const settled = wait.then(() => 'from the store');
    await vi.advanceTimersByTimeAsync(0);
    return settled;
  }

  it('a busy caller takes batches sized from its recent admissions: most requests cost no store call', async () => {
    const { state, shared } = leasingStore();
    const { guard } = makeGuard({ rateLimit, shared });
    const how: string[] = [];
    for (let i = 0; i < 40; i++) how.push(await admitOne(guard));
    // Each batch is the admissions so far in the lease window: 0, 1, 3, 7, 15, ...
    expect(how.slice(0, 4)).toEqual([
      'from the store',
      'from the store',
      'at once',
      'from the store',
    ]);
    expect(state.leases.slice(0, 5)).toEqual([0, 1, 3, 7, 15]);
    expect(state.calls).toBeLessThanOrEqual(6);
  });

  it('leased slots end with their lease; the next request asks the store', async () => {
    const { state, shared } = leasingStore();
    const { guard } = makeGuard({ rateLimit, shared });
    for (let i = 0; i < 2; i++) await admitOne(guard); // the second is granted with a batch of 1
    const calls = state.calls;
    expect(await admitOne(guard)).toBe('at once');
    await vi.advanceTimersByTimeAsync(LEASE_MS);
    expect(await admitOne(guard)).toBe('from the store');
    expect(state.calls).toBe(calls + 1);
  });

  it("a batch is its caller's: another caller's request does not spend it", async () => {
    const { state, shared } = leasingStore();
    const callers = new Callers({ own: 'default', header: 'x-caller', policies: [] });
    const { guard } = makeGuard({ rateLimit, shared, callers });
    const alpha = guard.callerOf({ 'x-caller': 'alpha' });
    const bravo = guard.callerOf({ 'x-caller': 'bravo' });
    for (let i = 0; i < 2; i++) await admitOne(guard, alpha); // a batch of 1 held
    const calls = state.calls;
    expect(await admitOne(guard, bravo)).toBe('from the store');
    expect(await admitOne(guard, alpha)).toBe('at once');
    expect(state.calls).toBe(calls + 1);
  });

  it('a cooldown drops the leased slots: nothing leased is sent into it or after it', async () => {
    const { state, shared } = leasingStore();
    const { guard } = makeGuard({ rateLimit, shared });
    for (let i = 0; i < 4; i++) await admitOne(guard); // a batch of 3 held
    guard.observe(429, { 'retry-after': '1' });
    expect(refusal(() => guard.admit()).code).toBe('upstream_rate_limited');
    await vi.advanceTimersByTimeAsync(1_000); // the cooldown is over, the lease is not
    const calls = state.calls;
    expect(await admitOne(guard)).toBe('from the store');
    expect(state.calls).toBe(calls + 1);
  });

  it("a fleet cooldown the store reports drops this member's batch too", async () => {
    const { state, shared } = leasingStore();
    const callers = new Callers({ own: 'default', header: 'x-caller', policies: [] });
    const two = makeGuard({ rateLimit, shared, callers }).guard;
    const alpha = two.callerOf({ 'x-caller': 'alpha' });
    const bravo = two.callerOf({ 'x-caller': 'bravo' });
    for (let i = 0; i < 4; i++) await admitOne(two, alpha); // alpha holds a batch
    state.cooldown = { status: 429, msLeft: 1_000 };
    // bravo's decision reads the fleet's cooldown: alpha's batch is dropped with it.
    const refused = track(two.admit(undefined, bravo)!);
    await vi.advanceTimersByTimeAsync(0);
    expect((refused.reason as SidecarError).code).toBe('upstream_rate_limited');
    expect(refusal(() => two.admit(undefined, alpha)).code).toBe('upstream_rate_limited');
    state.cooldown = undefined;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await admitOne(two, alpha)).toBe('from the store');
  });
});
