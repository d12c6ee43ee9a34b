/**
 * Runs before every test file (vitest `setupFiles`). Files share a worker's module graph
 * (`isolate: false` in vitest.config.ts), so what one file changes in vitest's own state must not
 * reach the next: after each file, timers are real again, spies restored and stubs removed.
 */
import { afterAll, vi } from 'vitest';

afterAll(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
  vi.unstubAllGlobals();
});
