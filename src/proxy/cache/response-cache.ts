/**
 * The opt-in response cache (docs/response-cache.md), as a stage of the request path
 * (proxy/stages.ts). `beforeUpstream` runs before the token is fetched: a hit is answered there
 * and costs no token, no rate-limit slot (the quota guard's stage comes after it) and no upstream
 * request. `upstreamAnswered` adds `Cache-Status` and captures a storable answer while it streams.
 * Paths outside every rule leave both hooks at once; without rules sidecar.ts installs no stage.
 *
 * Safe only because one identity (the organisation's client) serves every caller: an answer the
 * API gave the sidecar is the answer it would give any caller of the sidecar.
 *
 * This module decides how each request is answered: the local LRU (entries.ts) first; an identical
 * request's fill (flights.ts); with `cache.shared`, the leader of a local miss asks the fleet's
 * store (shared-tier.ts) next; then upstream under a plan (plans.ts) whose answer fills the entry
 * (fills.ts). Stale entries answer instead of errors and while they are refreshed (stale.ts,
 * refresh.ts), always marked as such (serve.ts).
 */
import type { CacheRule } from '../../config/types.js';
import type { SidecarError } from '../../errors.js';
import { CLIENT_GONE, type ClientResponse, type ForwardOutcome } from '../outcome.js';
import type { BodyTap, ExchangeView, Forward, Served, UpstreamHead } from '../stages.js';
import { Fills } from './fills.js';
import { requestDirective, type RequestDirective } from '../../http-fields/cache-control.js';
import { cacheKey, normalizedPath, type StaleWindows } from './directives.js';
import { createCacheEntries, type CacheEntries, type StoredAnswer } from './entries.js';
import { Flights, waitFor, type Flight } from './flights.js';
import { bypassPlan, type FillPlan, type Plan } from './plans.js';
import { Refreshes } from './refresh.js';
import { CACHE_NAME, hitMember, serveAnswer, withCacheStatus } from './serve.js';
import { SharedTier } from './shared-tier.js';
import { StaleAnswers } from './stale.js';
import type {
  CacheMetrics,
  CacheStats,
  ResponseCache,
  ResponseCacheOptions,
} from './cache-contract.js';

/** Requests waiting for one upstream answer at most; further ones go upstream on their own. */
export const DEFAULT_MAX_WAITERS = 256;
/** The default upstream.timeoutMs + upstream.bodyTimeoutMs. */
const DEFAULT_MAX_WAIT_MS = 60_000;
/**
 * What `beforeUpstream` resolves to when the request goes on: a promise on every path, as from
 * an async function, so the forwarder awaits the stage as it always does.
 */
const GO_ON: Promise<undefined> = Promise.resolve(undefined);

export function createResponseCache(options: ResponseCacheOptions): ResponseCache {
  return new Cache(options);
}

class Cache implements ResponseCache {
  readonly entries: CacheEntries;
  /** Bumped by every invalidation: an answer whose request began before it is not stored. */
  generation = 0;
  readonly #clock: ResponseCacheOptions['clock'];
  readonly #metrics: CacheMetrics;
  readonly #maxWaiters: number;
  readonly #stale: StaleWindows;
  /** Longest prefix first: the most specific rule wins. */
  readonly #rules: CacheRule[];
  readonly #flights: Flights;
  readonly #plans = new WeakMap<ExchangeView, Plan>();
  readonly #shared: SharedTier | undefined;
  readonly #refreshes = new Refreshes();
  readonly #staleAnswers: StaleAnswers;
  readonly #fills: Fills;
  /** `cache.maxEntryBytes`: a larger entry of the fleet answers but is not kept here. */
  readonly #maxEntryBytes: number;

  constructor(options: ResponseCacheOptions) {
    const { settings, metrics } = options;
    this.#clock = options.clock;
    this.#metrics = metrics;
    this.#maxWaiters = options.maxWaiters ?? DEFAULT_MAX_WAITERS;
    this.#stale = {
      ifError: settings.staleIfErrorSeconds,
      whileRevalidate: settings.staleWhileRevalidateSeconds,
    };
    this.#rules = [...settings.rules].sort((a, b) => b.prefix.length - a.prefix.length);
    this.entries = createCacheEntries(
      { maxBytes: settings.maxBytes, maxEntries: settings.maxEntries },
      (bytes) => metrics.cacheBytes.set(bytes),
    );
    const maxWaitMs = options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
    this.#flights = new Flights(maxWaitMs, (key, flight) => {
      if (flight.lease !== undefined && !flight.shared) this.#shared?.release(key);
    });
    if (options.shared !== undefined) {
      this.#shared = new SharedTier({
        entries: options.shared,
        maxEntryBytes: settings.maxSharedEntryBytes,
        maxWaitMs,
        now: () => this.#clock.now(),
        metrics,
      });
    }
    const shared = this.#shared;
    const parts = {
      entries: this.entries,
      maxEntryBytes: settings.maxEntryBytes,
      windows: this.#stale,
      clock: this.#clock,
      metrics,
      shared,
      generation: (): number => this.generation,
    };
    this.#fills = new Fills(parts);
    this.#staleAnswers = new StaleAnswers({ ...parts, refreshes: this.#refreshes });
    this.#maxEntryBytes = settings.maxEntryBytes;
  }

  attach(forward: Forward): void {
    this.#refreshes.attach(forward);
  }

  stats(): CacheStats {
    return {
      ...this.entries.stats(),
      rules: this.#rules.length,
      shared: this.#shared !== undefined,
      waiting: this.#flights.waiting(),
      refreshing: this.#refreshes.size,
    };
  }

  beforeUpstream(exchange: ExchangeView): Promise<ForwardOutcome | undefined> {
    const { req, target } = exchange;
    const query = target.indexOf('?');
    const path = normalizedPath(query === -1 ? target : target.slice(0, query));
    const rule = this.#ruleFor(path);
    if (!rule) return GO_ON;
    const directive = requestDirective(req.headers['cache-control'], req.headers.pragma);
    const bypass = bypassPlan(exchange, path, directive);
    if (bypass !== undefined) {
      this.#metrics.cacheRequests.inc({ result: 'bypass' });
      this.#plan(exchange, bypass);
      return GO_ON;
    }
    const uri = query === -1 ? path : `${path}${target.slice(query)}`;
    const key = cacheKey(uri, req.headers);
    if (this.#refreshes.isRefresh(exchange)) {
      return Promise.resolve(this.#refreshPlan(exchange, key, path, rule));
    }
    return this.#lookup(exchange, key, path, rule, directive);
  }

  /**
   * A cacheable GET or HEAD: answered here (a fresh or stale entry, the fleet's entry, an
   * identical request's fill), or sent upstream leading a fill of `key` or behind one.
   */
  async #lookup(
    exchange: ExchangeView,
    key: string,
    path: string,
    rule: CacheRule,
    directive: RequestDirective,
  ): Promise<ForwardOutcome | undefined> {
    const { req, method } = exchange;
    const lookupStart = exchange.trace === undefined ? 0 : this.#clock.now();
    let fwd = 'request';
    let waited = false;
    let stale: StoredAnswer | undefined;
    // Waits behind a leader whose own requester left before the answer: each such round costs
    // one upstream request, so two rounds bound 1 + N callers at 2 (DESIGN "Bounded work").
    let handoffs = 0;
    // No await before the lead is taken: identical requests arriving together coalesce.
    while (directive === 'none') {
      const now = this.#clock.now();
      const found = this.entries.lookup(key, path, req.headers, now);
      if (found.kind === 'hit') return this.#hit(exchange, found.answer, waited, lookupStart, now);
      fwd = found.kind;
      const flight: Flight | undefined =
        method === 'GET' && !waited ? this.#flights.get(key) : undefined;
      if (found.kind === 'stale' && found.answer !== undefined) {
        stale = found.answer;
        // Within stale-while-revalidate an entry answers at once. Without the shared tier this
        // process decides the one refresh; with it, the leader of this key asks the fleet first
        // (and requests behind it answer stale as well).
        const local = this.#shared === undefined || flight !== undefined || waited;
        if (local && now < stale.staleWhileRevalidateUntil) {
          const refresh = this.#shared === undefined;
          return this.#staleAnswers.whileRevalidate(exchange, stale, key, refresh, undefined);
        }
      }
      if (!flight || flight.waiters >= this.#maxWaiters) break;
      if ((await waitFor(flight, exchange)) === 'gone') return CLIENT_GONE;
      waited = !(flight.abandoned && ++handoffs < 2);
      // The fill failed and its leader answered stale: so do its waiters (no request each).
      if (flight.staleUse !== undefined && stale !== undefined) {
        const served = this.#staleAnswers.ifError(exchange, stale, flight.staleUse, undefined);
        if (served !== undefined) return served;
      }
    }
    const member = `${CACHE_NAME}; fwd=${fwd}`;
    if (method === 'HEAD')
      return this.#miss(exchange, lookupStart, { kind: 'pass', member, stale });
    const flight = waited || this.#flights.has(key) ? undefined : this.#flights.lead(exchange, key);
    const plan = this.#fillPlan(exchange, member, key, path, rule, flight, stale);
    if (flight !== undefined && this.#shared !== undefined && directive === 'none') {
      const served = await this.#askFleet(exchange, plan, flight, this.#shared);
      if (served !== undefined) {
        this.#traceLookup(exchange, lookupStart, 'shared');
        return served;
      }
    }
    return this.#miss(exchange, lookupStart, plan);
  }

  /**
   * The leader of a local miss asks the fleet (docs/response-cache.md "Shared tier"): the store's
   * fresh entry answers and fills the local tier; else this process takes the fleet's fill lease,
   * or a stale entry answers while another member (or this one's refresh) fills the key.
   * Undefined: go upstream with `plan` (holding the fleet's lease if `flight.lease` says so).
   */
  async #askFleet(
    exchange: ExchangeView,
    plan: FillPlan,
    flight: Flight,
    shared: SharedTier,
  ): Promise<ForwardOutcome | undefined> {
    const windows = this.#stale;
    const { key, path, headers } = plan;
    const found = await shared.lookup(key, path, {
      headers,
      limits: {
        freshMs: plan.rule.ttlSeconds * 1000,
        staleIfErrorMs: windows.ifError * 1000,
        staleWhileRevalidateMs: windows.whileRevalidate * 1000,
      },
      staleOk: (answer) => this.#clock.now() < answer.staleWhileRevalidateUntil,
      gone: () => exchange.clientGone(),
    });
    // The store failed (undefined): this process decides alone, as without the shared tier.
    flight.lease = found?.lease;
    if (flight.lease !== undefined) shared.keep(key, flight);
    const now = this.#clock.now();
    const answer = found?.answer;
    if (answer !== undefined) {
      // The fleet's entry serves this process too (a stale one for its stale windows).
      const fits = answer.body.length <= this.#maxEntryBytes;
      if (fits && this.generation === plan.generation) this.entries.put(key, path, answer);
      if (answer.expiresAt > now) {
        flight.settle();
        this.#metrics.cacheRequests.inc({ result: 'hit' });
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
      return this.#staleAnswers.whileRevalidate(exchange, stale, key, found?.held !== true, lease);
    }
    if (exchange.clientGone()) return CLIENT_GONE;
    return undefined;
  }

  /** A fresh entry answers (`waited`: one an identical request's fill just stored). */
  #hit(
    exchange: ExchangeView,
    answer: StoredAnswer,
    waited: boolean,
    lookupStart: number,
    now: number,
  ): ForwardOutcome {
    const result = waited ? 'coalesced' : 'hit';
    this.#metrics.cacheRequests.inc({ result });
    this.#traceLookup(exchange, lookupStart, result);
    return serveAnswer(answer, exchange, hitMember(answer, now), now);
  }

  /** The request goes upstream under `plan` (counted, and traced with the lookup's time). */
  #miss(exchange: ExchangeView, lookupStart: number, plan: Plan): undefined {
    this.#metrics.cacheRequests.inc({ result: 'miss' });
    this.#traceLookup(exchange, lookupStart, 'miss');
    return this.#plan(exchange, plan);
  }

  upstreamAnswered(
    exchange: ExchangeView,
    status: number,
    head: UpstreamHead,
  ): BodyTap | Served | undefined {
    const p = this.#plans.get(exchange);
    if (!p) return undefined;
    // The API failed; the last good answer may go instead, marked (its body is dropped).
    const served = this.#staleAnswers.insteadOfStatus(exchange, p, status);
    if (served !== undefined) return served;
    const headers = head.headers;
    const upstreamCacheStatus = headers['cache-status'];
    // The forwarder writes these headers to the client after this hook.
    headers['cache-status'] = withCacheStatus(upstreamCacheStatus, p.member);
    if (p.kind === 'unsafe' && status >= 200 && status < 300) {
      this.generation += 1;
      this.entries.invalidatePath(p.path);
      this.#shared?.invalidate(p.path);
    }
    if (p.kind !== 'fill') return undefined;
    return this.#fills.answered(p, status, headers, upstreamCacheStatus);
  }

  /** The API could not answer (or a cooldown or no token): a stale entry may instead. */
  failed(exchange: ExchangeView, error: SidecarError): ForwardOutcome | undefined {
    return this.#staleAnswers.insteadOfError(exchange, this.#plans.get(exchange), error);
  }

  /** A refresh goes upstream and fills the entry, holding the fleet's lease if it was given one. */
  #refreshPlan(
    exchange: ExchangeView,
    key: string,
    path: string,
    rule: CacheRule,
  ): ForwardOutcome | undefined {
    const lease = this.#refreshes.leaseOf(exchange);
    if (this.#flights.has(key)) {
      // A fill of the key is on its way already: it is the refresh.
      if (lease !== undefined) this.#shared?.release(key);
      return CLIENT_GONE;
    }
    const flight = this.#flights.lead(exchange, key);
    flight.lease = lease;
    if (lease !== undefined) this.#shared?.keep(key, flight);
    const member = `${CACHE_NAME}; fwd=stale`;
    return this.#plan(
      exchange,
      this.#fillPlan(exchange, member, key, path, rule, flight, undefined),
    );
  }

  /** The plan of a GET whose answer fills the entry of `key`, led by `flight` (if any). */
  #fillPlan(
    exchange: ExchangeView,
    member: string,
    key: string,
    path: string,
    rule: CacheRule,
    flight: Flight | undefined,
    stale: StoredAnswer | undefined,
  ): FillPlan {
    const headers = exchange.req.headers;
    return {
      kind: 'fill',
      member,
      key,
      path,
      rule,
      headers,
      flight,
      generation: this.generation,
      stale,
    };
  }

  /** With tracing on: the lookup (and any wait for a coalesced fill) as a span. */
  #traceLookup(exchange: ExchangeView, start: number, result: string): void {
    exchange.trace?.wait('cache.lookup', start, this.#clock.now(), {
      'oauth_sidecar.cache.result': result,
    });
  }

  #ruleFor(path: string): CacheRule | undefined {
    for (const rule of this.#rules) if (path.startsWith(rule.prefix)) return rule;
    return undefined;
  }

  /** The plan's Cache-Status also on answers the sidecar makes itself (errors before headers). */
  #plan(exchange: ExchangeView, p: Plan): undefined {
    (exchange.res as Pick<ClientResponse, 'setHeader'>).setHeader('cache-status', p.member);
    this.#plans.set(exchange, p);
    return undefined;
  }
}
