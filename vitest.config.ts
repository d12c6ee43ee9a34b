import { defineConfig } from 'vitest/config';

/**
 * Files run at once: three. Most of the suite's time is spent waiting on real processes (fail-overs,
 * token lifetimes, health checks), not computing, so a third file uses the CPU the others leave
 * idle on a 2-core machine (docs/testing.md "Files at once"); `VITEST_MAX_WORKERS` overrides it.
 */
const workers = Number(process.env.VITEST_MAX_WORKERS ?? 3);

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    maxWorkers: Number.isInteger(workers) && workers > 0 ? workers : 3,
    minWorkers: 1,
  },
});
