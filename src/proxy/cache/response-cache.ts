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
 * Tiers: the local LRU (entries.ts) in front; with `cache.shared`, the fleet's store behind it
 * (shared-tier.ts). Stale entries answer instead of errors and while they are refreshed
 * (RFC 5861), always marked as such (serve.ts).
 */
import type { Clock } from '../../clock.js';
import type { CacheRule, Config } from '../../config/types.js';
import type { SidecarError } from '../../errors.js';
import type { SharedCacheEntries } from '../../fleet/ports.js';
import type { SidecarMetrics } from '../../telemetry/metrics.js';
import { CLIENT_GONE, type ClientResponse, type ForwardOutcome } from '../outcome.js';
import type {
  BodyTap,
  ExchangeView,
  Forward,
  ForwardStage,
  Served,
  UpstreamHead,
} from '../stages.js';
import { capture, captureSpec } from './capture.js';
import { requestDirective } from '../../http-fields/cache-control.js';
import { normalizedPath, type StaleWindows } from './directives.js';
import { createCacheEntries, type CacheEntries, type StoredAnswer } from './entries.js';
import { Flights, waitFor, type Flight } from './flights.js';
import { bypassPlan, type FillPlan, type Plan } from './plans.js';
import { Refreshes } from './refresh.js';
import {
  CACHE_NAME,
  STALE_IF_ERROR_CODES,
  STALE_IF_ERROR_STATUSES,
  hitMember,
  serveAnswer,
  withCacheStatus,
  type StaleUse,
} from './serve.js';
import { SharedTier } from './shared-tier.js';

export type CacheSettings = Config['cache'];
export type CacheMetrics = Pick<SidecarMetrics, 'cacheRequests' | 'cacheBytes' | 'cacheShared'>;

/** Requests waiting for one upstream answer at most; further ones go upstream on their own. */
export const DEFAULT_MAX_WAITERS = 256;
/** The default upstream.timeoutMs + upstream.bodyTimeoutMs. */
const DEFAULT_MAX_WAIT_MS = 60_000;

export interface ResponseCacheOptions {
  settings: CacheSettings;
  clock: Pick<Clock, 'now'>;
  metrics: CacheMetrics;
  maxWaiters?: number;
  /**
   * The longest a request waits for an identical one's upstream answer: `upstream.timeoutMs` +
   * `upstream.bodyTimeoutMs` (the longest that answer may take); then it goes on its own. Also
   * the longest it waits for another member's fill while that member keeps renewing its lease.
   */
  maxWaitMs?: number;
  /** With `cache.shared` and a store: the fleet's tier. */
  shared?: SharedCacheEntries;
}

export interface CacheStats {
  entries: number;
  bytes: number;
  maxBytes: number;
  rules: number;
  shared: boolean;
  /** Requests waiting for an identical one on its way upstream. */
  waiting: number;
  /** Background refreshes of stale entries in progress. */
  refreshing: number;
}

export interface ResponseCache extends ForwardStage {
  /** For /status. */
  stats(): CacheStats;
}

function headerText(value: string | string[] | undefined): string {
  if (value === undefined) return '';
  return Array.isArray(value) ? value.join(', ') : value;
}

export function createResponseCache(options: ResponseCacheOptions): ResponseCache {
  return new Cache(options);
}

class Cache implements ResponseCache {
  readonly entries: CacheEntries;
  /** Bumped by every invalidation: an answer whose request began before it is not stored. */
  generation = 0;
  readonly #settings: CacheSettings;
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

  constructor(options: ResponseCacheOptions) {
    const { settings, metrics } = options;
    this.#settings = settings;
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

  async beforeUpstream(exchange: ExchangeView): Promise<ForwardOutcome | undefined> {
    const { req, method, target } = exchange;
    const query = target.indexOf('?');
    const path = normalizedPath(query === -1 ? target : target.slice(0, query));
    const rule = this.#ruleFor(path);
    if (!rule) return undefined;
    const directive = requestDirective(req.headers['cache-control'], req.headers.pragma);
    const bypass = bypassPlan(exchange, path, directive);
    if (bypass !== undefined) {
      this.#metrics.cacheRequests.inc({ result: 'bypass' });
      return this.#plan(exchange, bypass);
    }
    const uri = query === -1 ? path : `${path}${target.slice(query)}`;
    const key = `${uri}\n${headerText(req.headers.accept)}\n${headerText(req.headers['accept-encoding'])}`;
    if (this.#refreshes.isRefresh(exchange)) return this.#refreshPlan(exchange, key, path, rule);
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
      if (found.kind === 'hit') {
        const result = waited ? 'coalesced' : 'hit';
        this.#metrics.cacheRequests.inc({ result });
        this.#traceLookup(exchange, lookupStart, result);
        return serveAnswer(found.answer, exchange, hitMember(found.answer, now), now);
      }
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
          return this.#whileRevalidate(exchange, stale, key, this.#shared === undefined, undefined);
        }
      }
      if (!flight || flight.waiters >= this.#maxWaiters) break;
      if ((await waitFor(flight, exchange)) === 'gone') return CLIENT_GONE;
      waited = !(flight.abandoned && ++handoffs < 2);
      // The fill failed and its leader answered stale: so do its waiters (no request each).
      if (flight.staleUse !== undefined && stale !== undefined) {
        const served = this.#ifError(exchange, stale, flight.staleUse, undefined);
        if (served !== undefined) return served;
      }
    }
    const member = `${CACHE_NAME}; fwd=${fwd}`;
    if (method === 'HEAD')
      return this.#miss(exchange, lookupStart, { kind: 'pass', member, stale });
    const flight = waited || this.#flights.has(key) ? undefined : this.#flights.lead(exchange, key);
    const plan: FillPlan = {
      kind: 'fill',
      member,
      key,
      path,
      rule,
      headers: req.headers,
      flight,
      generation: this.generation,
      stale,
    };
    if (flight !== undefined && this.#shared !== undefined && directive === 'none') {
      const served = await this.#fromFleet(exchange, plan, flight);
      if (served !== undefined) {
        this.#traceLookup(exchange, lookupStart, 'shared');
        return served;
      }
    }
    return this.#miss(exchange, lookupStart, plan);
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
    if (p.kind !== 'unsafe' && p.stale !== undefined && STALE_IF_ERROR_STATUSES.has(status)) {
      // The API failed; the last good answer goes instead, marked (its body is dropped).
      const flight = p.kind === 'fill' ? p.flight : undefined;
      const served = this.#ifError(exchange, p.stale, { forwarded: true, status }, flight);
      if (served !== undefined) {
        if (p.kind === 'fill') p.flight?.settle();
        return { served: served.status };
      }
    }
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
    const spec = captureSpec(p, status, headers, {
      maxEntryBytes: this.#settings.maxEntryBytes,
      stale: this.#stale,
      now: this.#clock.now(),
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
      entries: this.entries,
      maxEntryBytes: this.#settings.maxEntryBytes,
      now: () => this.#clock.now(),
      captured: (answer: StoredAnswer | undefined) => this.#captured(p, answer),
      progress: p.flight && this.#shared?.capturing(p.key, p.flight, declared),
    };
    return capture(target, spec);
  }

  /** The API could not answer (or a cooldown or no token): a stale entry may instead. */
  failed(exchange: ExchangeView, error: SidecarError): ForwardOutcome | undefined {
    const p = this.#plans.get(exchange);
    if (p === undefined || p.kind === 'unsafe' || p.stale === undefined) return undefined;
    const forwarded = STALE_IF_ERROR_CODES.get(error.code);
    if (forwarded === undefined) return undefined;
    return this.#ifError(
      exchange,
      p.stale,
      { forwarded },
      p.kind === 'fill' ? p.flight : undefined,
    );
  }

  /** A fill's capture is over: store what arrived whole, here and (holding the lease) in the fleet. */
  #captured(p: FillPlan, answer: StoredAnswer | undefined): void {
    if (answer !== undefined && this.generation === p.generation) {
      this.entries.put(p.key, p.path, answer);
      const lease = p.flight?.lease;
      if (lease !== undefined && this.#shared?.share(p.key, p.path, answer, lease.generation)) {
        p.flight!.shared = true;
      }
    }
    p.flight?.settle();
  }

  /**
   * The leader of a local miss asks the fleet: its fresh entry answers; else this process takes
   * the fill lease (or waits while another member fills). Undefined: go upstream with `plan`.
   */
  async #fromFleet(
    exchange: ExchangeView,
    plan: FillPlan,
    flight: Flight,
  ): Promise<ForwardOutcome | undefined> {
    const { key, path, headers } = plan;
    const found = await this.#shared!.lookup(key, path, {
      headers,
      limits: {
        freshMs: plan.rule.ttlSeconds * 1000,
        staleIfErrorMs: this.#stale.ifError * 1000,
        staleWhileRevalidateMs: this.#stale.whileRevalidate * 1000,
      },
      staleOk: (answer) => this.#clock.now() < answer.staleWhileRevalidateUntil,
      gone: () => exchange.clientGone(),
    });
    // The store failed (undefined): this process decides alone, as without the shared tier.
    flight.lease = found?.lease;
    if (flight.lease !== undefined) this.#shared!.keep(key, flight);
    const now = this.#clock.now();
    const answer = found?.answer;
    if (answer !== undefined) {
      // The fleet's entry serves this process too (a stale one for its stale windows).
      const fits = answer.body.length <= this.#settings.maxEntryBytes;
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
      return this.#whileRevalidate(exchange, stale, key, found?.held !== true, lease);
    }
    if (exchange.clientGone()) return CLIENT_GONE;
    return undefined;
  }

  /** Answer with a stale entry within stale-while-revalidate; start its one refresh if asked. */
  #whileRevalidate(
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
    return this.#plan(exchange, {
      kind: 'fill',
      member: `${CACHE_NAME}; fwd=stale`,
      key,
      path,
      rule,
      headers: exchange.req.headers,
      flight,
      generation: this.generation,
      stale: undefined,
    });
  }

  /** Answer with a stale entry instead of an error, if its stale-if-error window allows. */
  #ifError(
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
