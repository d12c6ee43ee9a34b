import { defineConfig } from 'vitest/config';

/**
 * Files run at once: three. Most of the suite's time is spent waiting on real processes (fail-overs,
 * token lifetimes, health checks), not computing, so a third file uses the CPU the others leave
 * idle on a 2-core machine (docs/testing.md "Files at once"); `VITEST_MAX_WORKERS` overrides it.
 */
const asked = Number(process.env.VITEST_MAX_WORKERS ?? 3);
const workers = Number.isInteger(asked) && asked > 0 ? asked : 3;

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Each worker runs its files in one module graph instead of a fresh one per file: loading
    // vitest and the sources again for each of ~175 files was most of the unit tests' time
    // (docs/testing.md "One module graph per worker"). test/helpers/file-reset.ts undoes what a
    // file leaves in vitest's own state.
    isolate: false,
    setupFiles: ['test/helpers/file-reset.ts'],
    // `expect.poll` waits as long as `waitFor` does (test/helpers/wait.ts): its own default of 1 s is
    // a timing assertion on a loaded 2-core machine, not a limit on the behaviour.
    expect: { poll: { timeout: 10_000 } },
    // Tests of a `describe.concurrent` block at once, in one file (vitest's default is 5): the process
    // files' scenarios each wait on real-time conditions of their own processes, and store-distrust
    // has nine of them; five at a time queued the last four behind the first (docs/testing.md).
    maxConcurrency: 10,
    maxWorkers: workers,
    // As many kept as run: a worker stopped between files while others still run ends the run
    // with "Terminating worker thread" when files share workers.
    minWorkers: workers,
  },
});
