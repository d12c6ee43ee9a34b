/**
 * The leader of a local miss asks the fleet (docs/response-cache.md "Shared tier"): the store's
 * fresh entry answers and fills the local tier; else this process takes the fleet's fill lease,
 * or a stale entry answers while another member (or this one's refresh) fills the key.
 */
import type { Clock } from '../../clock.js';
import type { SidecarMetrics } from '../../telemetry/metrics.js';
import { CLIENT_GONE, type ForwardOutcome } from '../outcome.js';
import type { ExchangeView } from '../stages.js';
import type { StaleWindows } from './directives.js';
import type { CacheEntries } from './entries.js';
import type { Flight } from './flights.js';
import type { FillPlan } from './plans.js';
import { hitMember, serveAnswer } from './serve.js';
import type { SharedTier } from './shared-tier.js';
import type { StaleAnswers } from './stale.js';

export interface FleetLookupOptions {
  shared: SharedTier;
  entries: CacheEntries;
  stale: StaleAnswers;
  /** `cache.maxEntryBytes`: a larger entry of the fleet answers but is not kept here. */
  maxEntryBytes: number;
  windows: StaleWindows;
  clock: Pick<Clock, 'now'>;
  metrics: Pick<SidecarMetrics, 'cacheRequests'>;
  /** The cache's invalidation count now: an entry read before the latest one is not kept. */
  generation: () => number;
}

export class FleetLookup {
  readonly #o: FleetLookupOptions;

  constructor(options: FleetLookupOptions) {
    this.#o = options;
  }

  /** Undefined: go upstream with `plan` (holding the fleet's lease if `flight.lease` says so). */
  async lookup(
    exchange: ExchangeView,
    plan: FillPlan,
    flight: Flight,
  ): Promise<ForwardOutcome | undefined> {
    const { shared, windows, clock } = this.#o;
    const { key, path, headers } = plan;
    const found = await shared.lookup(key, path, {
      headers,
      limits: {
        freshMs: plan.rule.ttlSeconds * 1000,
        staleIfErrorMs: windows.ifError * 1000,
        staleWhileRevalidateMs: windows.whileRevalidate * 1000,
      },
      staleOk: (answer) => clock.now() < answer.staleWhileRevalidateUntil,
      gone: () => exchange.clientGone(),
    });
    // The store failed (undefined): this process decides alone, as without the shared tier.
    flight.lease = found?.lease;
    if (flight.lease !== undefined) shared.keep(key, flight);
    const now = clock.now();
    const answer = found?.answer;
    if (answer !== undefined) {
      // The fleet's entry serves this process too (a stale one for its stale windows).
      const fits = answer.body.length <= this.#o.maxEntryBytes;
      if (fits && this.#o.generation() === plan.generation) this.#o.entries.put(key, path, answer);
      if (answer.expiresAt > now) {
        flight.settle();
        this.#o.metrics.cacheRequests.inc({ result: 'hit' });
        return serveAnswer(answer, exchange, hitMember(answer, now), now);
      }
      if (plan.stale === undefined || answer.storedAt > plan.stale.storedAt) plan.stale = answer;
    }
    const stale = plan.stale;
    if (stale !== undefined && now < stale.staleWhileRevalidateUntil) {
      // The lease makes this process the fleet's one refresher; held elsewhere, another is.
      const lease = flight.lease;
      flight.lease = undefined;
      flight.settle();
      return this.#o.stale.whileRevalidate(exchange, stale, key, found?.held !== true, lease);
    }
    if (exchange.clientGone()) return CLIENT_GONE;
    return undefined;
  }
}
