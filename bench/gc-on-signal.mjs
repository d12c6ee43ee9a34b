// Loaded with --import (and --expose-gc) into a sidecar under bench/cache-memory.mjs: on SIGUSR2
// it collects all garbage and writes process.memoryUsage() and V8's committed size per heap space
// as JSON to $MEMORY_FILE, so the bench compares what stays alive, not what the collector has not
// reached yet, and says where the rest of the resident memory is.
import { writeFileSync } from 'node:fs';
import process from 'node:process';
import { getHeapSpaceStatistics } from 'node:v8';

process.on('SIGUSR2', () => {
  globalThis.gc?.();
  globalThis.gc?.();
  const spaces = Object.fromEntries(
    getHeapSpaceStatistics().map((space) => [space.space_name, space.space_size]),
  );
  writeFileSync(
    process.env.MEMORY_FILE ?? 'memory.json',
    JSON.stringify({ ...process.memoryUsage(), spaces }),
  );
});
