/**
 * Stale entries that answer (RFC 5861, docs/response-cache.md "Stale answers"): within
 * stale-while-revalidate at once, starting the entry's one refresh; within stale-if-error instead
 * of an error (an upstream 5xx, or the sidecar's own error). Each answer is counted and marked as
 * stale (serve.ts).
 */
import type { Clock } from '../../clock.js';
import type { SidecarMetrics } from '../../telemetry/metrics.js';
import type { SidecarError } from '../../errors.js';
import type { ForwardOutcome } from '../outcome.js';
import type { ExchangeView, Served } from '../stages.js';
import type { StoredAnswer } from './entries.js';
import type { Flight } from './flights.js';
import type { Plan } from './plans.js';
import type { Refreshes } from './refresh.js';
import { hitMember, serveAnswer, type StaleUse } from './serve.js';
import type { SharedTier } from './shared-tier.js';

/** Upstream answers a stale entry answers instead of (RFC 5861 §4). */
export const STALE_IF_ERROR_STATUSES = new Set([500, 502, 503, 504]);

/**
 * The sidecar's own errors a stale entry answers instead of (DESIGN "Stale answers"), each with
 * whether the request had gone upstream (`fwd=stale`).
 */
export const STALE_IF_ERROR_CODES = new Map([
  ['upstream_unreachable', true],
  ['upstream_timeout', true],
  ['upstream_unavailable', false],
  ['upstream_rate_limited', false],
  ['token_unavailable', false],
]);

export interface StaleAnswersOptions {
  clock: Pick<Clock, 'now'>;
  metrics: Pick<SidecarMetrics, 'cacheRequests'>;
  refreshes: Refreshes;
  /** With `cache.shared`: the fleet's tier, whose fill lease a refresh may take over. */
  shared: SharedTier | undefined;
}

export class StaleAnswers {
  readonly #clock: StaleAnswersOptions['clock'];
  readonly #metrics: StaleAnswersOptions['metrics'];
  readonly #refreshes: Refreshes;
  readonly #shared: SharedTier | undefined;

  constructor(options: StaleAnswersOptions) {
    this.#clock = options.clock;
    this.#metrics = options.metrics;
    this.#refreshes = options.refreshes;
    this.#shared = options.shared;
  }

  /** Answer with a stale entry within stale-while-revalidate; start its one refresh if asked. */
  whileRevalidate(
    exchange: ExchangeView,
    stale: StoredAnswer,
    key: string,
    refresh: boolean,
    lease: Flight['lease'],
  ): ForwardOutcome {
    if (refresh && this.#refreshes.start(key, exchange, lease)) lease = undefined;
    if (lease !== undefined) this.#shared?.release(key);
    this.#metrics.cacheRequests.inc({ result: 'stale' });
    const now = this.#clock.now();
    const use: StaleUse = { detail: 'stale-while-revalidate', forwarded: false };
    return serveAnswer(stale, exchange, hitMember(stale, now, use), now);
  }

  /** Answer with a stale entry instead of an error, if its stale-if-error window allows. */
  ifError(
    exchange: ExchangeView,
    stale: StoredAnswer,
    how: Flight['staleUse'] & object,
    flight: Flight | undefined,
  ): ForwardOutcome | undefined {
    const now = this.#clock.now();
    if (now >= stale.staleIfErrorUntil || exchange.clientGone()) return undefined;
    if (flight !== undefined) flight.staleUse = how;
    this.#metrics.cacheRequests.inc({ result: 'stale' });
    return serveAnswer(
      stale,
      exchange,
      hitMember(stale, now, { detail: 'stale-if-error', ...how }),
      now,
    );
  }

  /** The upstream answered `p`'s request with a 5xx: its stale entry may answer instead. */
  insteadOfStatus(exchange: ExchangeView, p: Plan, status: number): Served | undefined {
    if (p.kind === 'unsafe' || p.stale === undefined || !STALE_IF_ERROR_STATUSES.has(status)) {
      return undefined;
    }
    const flight = p.kind === 'fill' ? p.flight : undefined;
    const served = this.ifError(exchange, p.stale, { forwarded: true, status }, flight);
    if (served === undefined) return undefined;
    flight?.settle();
    return { served: served.status };
  }

  /** The API could not answer `p`'s request (or a cooldown or no token): a stale entry may. */
  insteadOfError(
    exchange: ExchangeView,
    p: Plan | undefined,
    error: SidecarError,
  ): ForwardOutcome | undefined {
    if (p === undefined || p.kind === 'unsafe' || p.stale === undefined) return undefined;
    const forwarded = STALE_IF_ERROR_CODES.get(error.code);
    if (forwarded === undefined) return undefined;
    const flight = p.kind === 'fill' ? p.flight : undefined;
    return this.ifError(exchange, p.stale, { forwarded }, flight);
  }
}
