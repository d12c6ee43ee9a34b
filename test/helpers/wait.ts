/**
 * The suite's only ways to wait on the real clock (docs/testing.md "Time in tests"). Below the
 * process boundary tests drive the injected clock or vitest's fake timers; across it (a child
 * process, a real redis-server's own clock) they wait for a condition with {@link waitFor}, and
 * never assert how long a wait took. Where a test must let real time pass (a pace, a TTL kept by
 * another process), it says why with {@link realClock}: the reasons are listed in docs/testing.md,
 * and test/test-clock.test.ts keeps every other sleep out of the suite.
 */

/** Thrown by a {@link waitFor} condition: give up at once (a server that exited). */
export class Fatal extends Error {}

export interface WaitOptions {
  /** Poll interval (ms); 25 unless told. */
  everyMs?: number;
  /** An error the condition throws counts as "not yet" (a server not listening yet); a {@link Fatal} one still ends the wait. */
  retryErrors?: boolean;
}

/**
 * Poll `fn` until it returns true; fails after `timeoutMs` (generous: a loaded 2-core machine is
 * slow, and only the condition is asserted, never the time it took).
 */
export async function waitFor(
  fn: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
  { everyMs = 25, retryErrors = false }: WaitOptions = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await fn()) return;
    } catch (error) {
      if (!retryErrors || error instanceof Fatal) throw error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Real time a test lets pass on purpose, with the reason it cannot use a fake clock. */
export interface RealClock {
  readonly reason: string;
  sleep(ms: number): Promise<void>;
  /**
   * Milliseconds of real time from this call on, read with `ms()`: for a bound on the wall clock
   * that is itself the behaviour under test (a contract's "within 20 s"), or a count the real
   * clock decides (a rate limit's refills while a burst runs). The only way a test reads elapsed
   * time: test/test-clock.test.ts refuses `Date.now() - start` elsewhere.
   */
  stopwatch(): { ms(): number };
}

/**
 * The marker of a test that lets real time pass or reads how much did: `realClock('why')`. Grep
 * for `realClock(` to list them; docs/testing.md gives each reason.
 */
export function realClock(reason: string): RealClock {
  if (reason.trim() === '') throw new Error('realClock needs a reason');
  return {
    reason,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms))),
    stopwatch() {
      const started = performance.now();
      return { ms: () => performance.now() - started };
    },
  };
}
