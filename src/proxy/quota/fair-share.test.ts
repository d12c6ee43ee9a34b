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
import { Callers, FEW_UNLISTED, OTHER_CALLER } from './callers.js';
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
  const caller = (name: string) => guard.callerOf({ 'x-caller': name });
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
    const { guard, caller, counts } = gateway(
      [{ name: 'polite', weight: 1, priority: 'interactive' }],
      8,
    );
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

  it('unlisted names: a few have a state of their own, more share `other`; memory stays bounded at the limit', () => {
    const { guard, caller } = gateway([{ name: 'named', weight: 5, priority: 'batch' }]);
    const waiting = caller('waiting');
    for (let i = 0; i < 10; i++) expect(guard.admit(undefined, waiting)).toBeUndefined();
    void guard.admit(undefined, waiting)!.catch(() => undefined);
    // FEW_UNLISTED active at once (waiting is one of them) each keep their own state.
    const few = Array.from({ length: FEW_UNLISTED - 1 }, (_, i) => caller(`few-${i}`));
    for (const c of few) void guard.admit(undefined, c)?.catch(() => undefined);
    expect(new Set(few).size).toBe(FEW_UNLISTED - 1);
    for (const c of few) expect(c.name).toMatch(/^few-/);
    // Beyond them every new name is `other`, and nothing more is kept however many come.
    for (let i = 0; i < 5_000; i++) expect(caller(`invented-${i}`).name).toBe(OTHER_CALLER);
    expect(caller('waiting')).toBe(waiting);
    expect(caller('named').weight).toBe(5);
    expect(caller('named').name).toBe('named');
    // listed + own + other + the unlisted few
    expect([...guard.callers.all()].length).toBe(1 + 1 + 1 + FEW_UNLISTED);
    // A period later (every waiter served) the idle few give their places to new names.
    vi.advanceTimersByTime(1_001);
    expect(guard.status().rateLimit?.queued).toBe(0);
    expect(caller('late').name).toBe('late');
    expect([...guard.callers.all()].length).toBe(1 + 1 + 1 + FEW_UNLISTED);
  });

  it('a new name per request (1,500 at once, then 30 loops) leaves a listed interactive caller of weight 3 every request within 1 s', async () => {
    const { guard, caller } = gateway([{ name: 'alice', weight: 3, priority: 'interactive' }], 512);
    let names = 0;
    const fresh = () => caller(`invented-${names++}`);
    const refusedAtOnce = { count: 0 };
    for (let i = 0; i < 1_500; i++) {
      try {
        void guard.admit(undefined, fresh())?.catch(() => undefined);
      } catch {
        refusedAtOnce.count += 1;
      }
    }
    // The invented names queue as one caller: all but what fits in queueMs (10 s here) are refused.
    expect(refusedAtOnce.count).toBeGreaterThan(1_350);
    const loops = Array.from({ length: 30 }, () => flood(guard, fresh(), 1));
    const alice = caller('alice');
    const waits: number[] = [];
    for (let i = 0; i < 12; i++) {
      await vi.advanceTimersByTimeAsync(400);
      const start = Date.now();
      await slot(guard.admit(undefined, alice));
      waits.push(Date.now() - start);
    }
    for (const loop of loops) loop.stopped = true;
    expect(Math.max(...waits)).toBeLessThanOrEqual(1_000);
    expect([...guard.callers.all()].length).toBeLessThanOrEqual(1 + 1 + 1 + FEW_UNLISTED);
  });

  it("in gateway mode the unlisted callers' waiters together hold at most half of the queue", () => {
    const { guard, caller } = gateway([{ name: 'listed', weight: 1, priority: 'interactive' }], 8);
    const one = caller('one');
    for (let i = 0; i < 10; i++) expect(guard.admit(undefined, one)).toBeUndefined();
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    let refusal: SidecarError | undefined;
    for (const name of names) {
      try {
        void guard.admit(undefined, caller(name))?.catch(() => undefined);
      } catch (err) {
        refusal = err as SidecarError;
        break;
      }
    }
    expect(refusal?.code).toBe('rate_limited');
    expect(refusal?.message).toContain('waiters fill its share');
    expect(guard.status().rateLimit?.queued).toBe(4);
    // A listed caller still finds room.
    const listed = guard.admit(undefined, caller('listed'));
    expect(listed).toBeInstanceOf(Promise);
    listed?.catch(() => undefined);
  });

  it("the caller header: case folded, and anything not a valid name is this sidecar's own caller", () => {
    const { guard, caller } = gateway();
    expect(guard.callerOf({ 'x-caller': 'Reports-UI' })).toBe(caller('reports-ui'));
    const own = guard.callers.own;
    expect(own.name).toBe('default');
    expect(guard.callerOf({})).toBe(own);
    expect(guard.callerOf({ 'x-caller': 'two words' })).toBe(own);
    expect(guard.callerOf({ 'x-caller': 'x'.repeat(65) })).toBe(own);
    expect(guard.callerOf({ 'x-caller': ['a', 'b'] })).toBe(own);
  });
});
