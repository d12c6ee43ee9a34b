/**
 * A fill's answer (docs/response-cache.md "What is stored, and how it is served"): a storable
 * answer is captured while it streams to its client, then stored here and, when this process holds
 * the fleet's fill lease, in the store; either way the fill settles and its waiters look again.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Clock } from '../../clock.js';
import type { BodyTap } from '../stages.js';
import { capture, captureSpec } from './capture.js';
import type { StaleWindows } from './directives.js';
import type { CacheEntries, StoredAnswer } from './entries.js';
import type { FillPlan } from './plans.js';
import { withCacheStatus } from './serve.js';
import type { SharedTier } from './shared-tier.js';

export interface FillsOptions {
  entries: CacheEntries;
  /** `cache.maxEntryBytes`. */
  maxEntryBytes: number;
  windows: StaleWindows;
  clock: Pick<Clock, 'now'>;
  /** With `cache.shared`: the fleet's tier. */
  shared: SharedTier | undefined;
  /** The cache's invalidation count now: an answer whose request began before the latest is not stored. */
  generation: () => number;
}

export class Fills {
  readonly #o: FillsOptions;

  constructor(options: FillsOptions) {
    this.#o = options;
  }

  /**
   * The upstream's answer head for `p`: a tap capturing it, or undefined when it is not stored
   * (the fill is over). `headers` get the `Cache-Status` member the client sees.
   */
  answered(
    p: FillPlan,
    status: number,
    headers: IncomingHttpHeaders,
    upstreamCacheStatus: string | string[] | undefined,
  ): BodyTap | undefined {
    const { entries, maxEntryBytes, clock } = this.#o;
    const spec = captureSpec(p, status, headers, {
      maxEntryBytes,
      stale: this.#o.windows,
      now: clock.now(),
      upstreamCacheStatus,
    });
    if (spec === undefined) {
      p.flight?.settle();
      return undefined;
    }
    // "stored" is said when the answer is being captured; one that then outgrows the limit is not.
    headers['cache-status'] = withCacheStatus(upstreamCacheStatus, `${p.member}; stored`);
    if (p.flight) p.flight.captured = true;
    const declared = Number(headers['content-length'] ?? 0);
    const target = {
      entries,
      maxEntryBytes,
      now: () => clock.now(),
      captured: (answer: StoredAnswer | undefined) => this.#captured(p, answer),
      progress: p.flight && this.#o.shared?.capturing(p.key, p.flight, declared),
    };
    return capture(target, spec);
  }

  /** A fill's capture is over: store what arrived whole, here and (holding the lease) in the fleet. */
  #captured(p: FillPlan, answer: StoredAnswer | undefined): void {
    if (answer !== undefined && this.#o.generation() === p.generation) {
      this.#o.entries.put(p.key, p.path, answer);
      const lease = p.flight?.lease;
      if (lease !== undefined && this.#o.shared?.share(p.key, p.path, answer, lease.generation)) {
        p.flight!.shared = true;
      }
    }
    p.flight?.settle();
  }
}
