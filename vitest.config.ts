import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Integration tests start real servers on port 0; a few files at a time keeps a 2-core box honest.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
