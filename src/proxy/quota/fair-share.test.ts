/**
 * Fair share between callers in one process (docs/quota-guard.md "Fair share between callers"),
 * on fake timers: the figures of docs/quota-guard.md at the guard's level. The same figures with real
 * processes and a real redis-server: test/fair-share.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../clock.js';
import type { NamedCallerPolicy } from '../../config/types.js';
import { SidecarError } from '../../errors.js';
import { createLogger } from '../../telemetry/logger.js';
import { Callers } from './callers.js';
import type { CallerState } from './fair-queue.js';
import { QuotaGuard } from './guard.js';

const logger = createLogger({ level: 'silent' });

function gateway(policies: NamedCallerPolicy[] = [], maxQueued = 1_000) {
  const counts = new Map<string, number>();
  const waits: { priority: string; seconds: number }[] = [];
  const guard = new QuotaGuard({
    rateLimit: { count: 10, periodMs: 1_000 },
    queueMs: 10_000,
    maxCooldownSeconds: 300,
    maxQueued,
    clock: systemClock,
    logger,
    callers: new Callers({ own: 'default', header: 'x-caller', policies }),
    metrics: {
      rateLimitWait: { observe: (labels, seconds) => waits.push({ ...labels, seconds }) },
      quotaRequests: {
        inc: ({ caller, outcome }) => {
          const key = `${caller}:${outcome}`;
          counts.set(key, (counts.get(key) ?? 0) + 1);
        },
      },
    },
  });
  const caller = (name: string) => guard.callers.of({ 'x-caller': name });
  return { guard, caller, counts, waits };
}

/** Keep `loops` requests of `caller` waiting at all times; counts what was admitted. */
function flood(guard: QuotaGuard, caller: CallerState, loops: number) {
  const state = { admitted: 0, refused: 0, stopped: false };
  const loop = (): void => {
    if (state.stopped) return;
    let wait: Promise<void> | undefined;
    try {
      wait = guard.admit(undefined, caller);
    } catch (err) {
      if (!(err instanceof SidecarError)) throw err;
      state.refused += 1;
      // A refused loop comes back on the next tick of the fake clock, as a blind retry would.
      setTimeout(loop, 10);
      return;
    }
    if (wait === undefined) {
      state.admitted += 1;
      queueMicrotask(loop);
      return;
    }
    wait.then(
      () => {
        state.admitted += 1;
        loop();
      },
      () => setTimeout(loop, 10),
    );
  };
  for (let i = 0; i < loops; i++) loop();
  return state;
}

/** Wait for a slot on the fake clock, 1 ms at a time: the wait is measured to the millisecond. */
async function slot(wait: Promise<void> | undefined): Promise<void> {
  if (wait === undefined) return;
  let done = false;
  wait.then(
    () => (done = true),
    (err: unknown) => {
      throw err;
    },
  );
  for (let ms = 0; !done && ms < 60_000; ms++) await vi.advanceTimersByTimeAsync(1);
  await wait;
}

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-11-25T01:00:00Z') });
});

afterEach(() => {
  vi.useRealTimers();
});

describe('fair share between callers (one process)', () => {
  it('an interactive caller beside a batch caller flooding with 30 loops: every request answered, none waits more than one slot interval', async () => {
    const { guard, caller } = gateway([{ name: 'nightly', weight: 1, priority: 'batch' }]);
    const batch = flood(guard, caller('nightly'), 30);
    const screen = caller('reports-ui');
    const waits: number[] = [];
    for (let i = 0; i < 20; i++) {
      await vi.advanceTimersByTimeAsync(300);
      const start = Date.now();
      await slot(guard.admit(undefined, screen));
      waits.push(Date.now() - start);
    }
    batch.stopped = true;
    expect(waits).toHaveLength(20);
    expect(Math.max(...waits)).toBeLessThanOrEqual(100);
    expect(batch.admitted).toBeGreaterThan(0);
  });

  it('two batch callers of weights 3 and 1, both flooding, get the rate 3:1 (± 20 %)', async () => {
    const { guard, caller } = gateway([
      { name: 'big', weight: 3, priority: 'batch' },
      { name: 'small', weight: 1, priority: 'batch' },
    ]);
    const big = flood(guard, caller('big'), 30);
    const small = flood(guard, caller('small'), 30);
    await vi.advanceTimersByTimeAsync(20_000);
    big.stopped = small.stopped = true;
    const ratio = big.admitted / small.admitted;
    expect(ratio).toBeGreaterThanOrEqual(2.4);
    expect(ratio).toBeLessThanOrEqual(3.6);
    // Together they used the whole rate: the initial bucket of 10 plus 10 a second.
    expect(big.admitted + small.admitted).toBeGreaterThanOrEqual(205);
    expect(big.admitted + small.admitted).toBeLessThanOrEqual(211);
  });

  it('one caller alone gets the whole rate', async () => {
    const { guard, caller } = gateway();
    const alone = flood(guard, caller('alone'), 30);
    await vi.advanceTimersByTimeAsync(10_000);
    alone.stopped = true;
    expect(alone.admitted).toBeGreaterThanOrEqual(105);
    expect(alone.admitted).toBeLessThanOrEqual(111);
  });

  it('what a caller leaves unused is lent to the other at once', async () => {
    const { guard, caller } = gateway();
    const hungry = flood(guard, caller('hungry'), 30);
    const light = caller('light');
    let lightAdmitted = 0;
    for (let i = 0; i < 20; i++) {
      // 2 a second where 5 would be its share.
      await vi.advanceTimersByTimeAsync(500);
      await slot(guard.admit(undefined, light));
      lightAdmitted += 1;
    }
    hungry.stopped = true;
    expect(lightAdmitted).toBe(20);
    // 10 s at 10/s plus the initial 10, less what `light` took.
    expect(hungry.admitted).toBeGreaterThanOrEqual(85);
  });

  it('interactive waiters go before batch waiters that arrived earlier', async () => {
    const { guard, caller } = gateway([{ name: 'nightly', weight: 1, priority: 'batch' }]);
    const nightly = caller('nightly');
    for (let i = 0; i < 10; i++) expect(guard.admit(undefined, nightly)).toBeUndefined();
    const order: string[] = [];
    for (let i = 0; i < 3; i++)
      void guard.admit(undefined, nightly)!.then(() => order.push('batch'));
    void guard.admit(undefined, caller('ui'))!.then(() => order.push('interactive'));
    await vi.advanceTimersByTimeAsync(400);
    expect(order[0]).toBe('interactive');
    expect(order).toHaveLength(4);
  });

  it("in gateway mode one caller's waiters hold at most half of the queue (proxy.maxInFlight)", () => {
    const { guard, caller, counts } = gateway([], 8);
    const greedy = caller('greedy');
    for (let i = 0; i < 10; i++) expect(guard.admit(undefined, greedy)).toBeUndefined();
    for (let i = 0; i < 4; i++) void guard.admit(undefined, greedy)!.catch(() => undefined);
    let refusal: unknown;
    try {
      void guard.admit(undefined, greedy);
    } catch (err) {
      refusal = err;
    }
    expect((refusal as SidecarError).code).toBe('rate_limited');
    expect((refusal as SidecarError).message).toContain("greedy's waiters fill its share");
    // Another caller still finds room.
    const polite = guard.admit(undefined, caller('polite'));
    expect(polite).toBeInstanceOf(Promise);
    polite?.catch(() => undefined);
    expect(counts.get('other:refused')).toBe(1);
  });

  it('a refusal says where the caller stands: RateLimit fields with r never below 0', () => {
    const { guard, caller } = gateway([], 2);
    const one = caller('one');
    const seen: string[] = [];
    for (let i = 0; i < 10; i++) {
      expect(guard.admit(undefined, one)).toBeUndefined();
      seen.push(guard.fieldsFor(one)!.ratelimit);
    }
    expect(seen.slice(0, 3)).toEqual([
      '"upstream";r=9;t=1',
      '"upstream";r=8;t=1',
      '"upstream";r=7;t=1',
    ]);
    expect(seen[9]).toBe('"upstream";r=0;t=1');
    void guard.admit(undefined, one)!.catch(() => undefined);
    let refusal: SidecarError | undefined;
    try {
      void guard.admit(undefined, one);
    } catch (err) {
      refusal = err as SidecarError;
    }
    expect(refusal?.fields).toEqual({
      'ratelimit-policy': '"upstream";q=10;w=1',
      ratelimit: '"upstream";r=0;t=1',
    });
  });

  it('unknown callers beyond the tracked maximum share one state; configured ones keep their own', () => {
    const { guard, caller } = gateway([{ name: 'named', weight: 5, priority: 'batch' }]);
    const waiting = caller('waiting');
    for (let i = 0; i < 10; i++) expect(guard.admit(undefined, waiting)).toBeUndefined();
    void guard.admit(undefined, waiting)!.catch(() => undefined);
    for (let i = 0; i < 5_000; i++) caller(`caller-${i}`);
    expect([...guard.callers.all()].length).toBeLessThanOrEqual(1_001);
    // A caller with a waiter and a configured one are never forgotten.
    expect(caller('waiting')).toBe(waiting);
    expect(caller('named').weight).toBe(5);
  });

  it("the caller header: case folded, and anything not a valid name is this sidecar's own caller", () => {
    const { guard, caller } = gateway();
    expect(guard.callers.of({ 'x-caller': 'Reports-UI' })).toBe(caller('reports-ui'));
    const own = guard.callers.own;
    expect(own.name).toBe('default');
    expect(guard.callers.of({})).toBe(own);
    expect(guard.callers.of({ 'x-caller': 'two words' })).toBe(own);
    expect(guard.callers.of({ 'x-caller': 'x'.repeat(65) })).toBe(own);
    expect(guard.callers.of({ 'x-caller': ['a', 'b'] })).toBe(own);
  });
});
