/**
 * A hand-made port of the response cache's shared tier (fleet/ports.ts `SharedCacheEntries`) for
 * unit tests: each read answers from the test's script, and every call is logged by the URI part
 * of its cache key (`read /a`, `write /a <body> @<generation>`, `release /a`, `renew /a`).
 */
import type { SharedAnswer, SharedCacheEntries, SharedRead } from '../../src/fleet/ports.js';

export interface SharedStorePort {
  port: SharedCacheEntries;
  log: string[];
  /** The answers written, in order, with the generation each was written under. */
  written: { key: string; answer: SharedAnswer; generation: string }[];
}

/** `reads`: the answers to the reads in turn; a read past them, or an Error, rejects. */
export function sharedStorePort(reads: (SharedRead | Error)[] = []): SharedStorePort {
  const log: string[] = [];
  const written: SharedStorePort['written'] = [];
  const uri = (key: string): string => key.split('\n')[0]!;
  const port: SharedCacheEntries = {
    read(key) {
      log.push(`read ${uri(key)}`);
      const next = reads.shift() ?? new Error('no read scripted');
      return next instanceof Error ? Promise.reject(next) : Promise.resolve(next);
    },
    write(key, _path, answer, generation) {
      log.push(`write ${uri(key)} ${answer.body.toString()} @${generation}`);
      written.push({ key, answer, generation });
      return Promise.resolve();
    },
    release(key) {
      log.push(`release ${uri(key)}`);
      return Promise.resolve();
    },
    renew(key) {
      log.push(`renew ${uri(key)}`);
      return Promise.resolve(true);
    },
    leaseTtlMs: 3_000,
    invalidate: () => Promise.resolve(),
    health: () => ({ up: true, connecting: false }),
  };
  return { port, log, written };
}
