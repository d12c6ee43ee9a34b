import { Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client';
import type { MetricsRegistry } from './exposition.js';

export const METRIC_PREFIX = 'oauth_sidecar_';

/**
 * What the token gauges read at scrape time: the keeper's status snapshot (telemetry never imports
 * the keeper).
 */
export interface TokenGaugeSource {
  status(): {
    /** True while a valid token is held. */
    ready: boolean;
    /** Seconds since the current access token was requested; null when none is held. */
    tokenAgeSeconds: number | null;
    /** Seconds until the current token expires; 0 when none is held. */
    expiresInSeconds: number;
  };
}

/** What the cooldown gauge reads at scrape time (the quota guard). */
export interface QuotaGaugeSource {
  /** Seconds left of the upstream cooldown, 0 if none. */
  cooldownSecondsLeft(): number;
}

export type TokenGrantLabel = 'client_credentials' | 'refresh_token';
export type TokenOutcomeLabel = 'success' | 'rejected' | 'error';

/** Every metric of docs/reference.md "Metrics", registered on an injected registry (one per instance). */
export interface SidecarMetrics {
  registry: MetricsRegistry;
  tokenRequests: Counter<'grant' | 'outcome'>;
  tokenRequestDuration: Histogram<'grant'>;
  upstreamRequests: Counter<'method' | 'code'>;
  /** With exemplars: a sampled request's trace id on its bucket (OpenMetrics scrapes). */
  upstreamRequestDuration: Histogram<'method'>;
  upstreamUnauthorized: Counter<'replayed'>;
  proxyRejected: Counter<'code'>;
  requestsInFlight: Gauge;
  /** Token sets taken from the shared store that another process obtained. */
  tokenAdopted: Counter;
  /** Response cache lookups under a rule (docs/response-cache.md). */
  cacheRequests: Counter<'result'>;
  /** Local misses that read the store (hit, coalesced, miss), entries written (stored), store failures (error). */
  cacheShared: Counter<'result'>;
  /** Bytes the response cache holds (bodies plus headers). */
  cacheBytes: Gauge;
  /** Point the token gauges at their source (the keeper is built after the metrics). */
  bindTokenState(source: TokenGaugeSource): void;
  /**
   * Expose `oauth_sidecar_token_store_up` (only with a store configured, so a sidecar without one
   * never looks like one whose store is down).
   */
  bindStoreState(source: StoreGaugeSource): void;
  /** Seconds each request admitted under `upstream.rateLimit` waited for its slot (0 if none). */
  rateLimitWait: Histogram<'priority'>;
  quotaRequests: Counter<'caller' | 'outcome'>;
  /** Point the cooldown gauge at the quota guard. */
  bindQuotaState(source: QuotaGaugeSource): void;
  /** With tracing on: spans dropped, by reason (registered on first call). */
  tracingSpansDropped(): Counter<'reason'>;
  /**
   * With `callers.auth: jwt` (registered on first call): `caller_auth_total{result}`, counted in
   * the tally returned, and `caller_keys_age_seconds` read from `keys` at scrape time.
   */
  callerAuth(keys: { ageSeconds(): number }): LabelTally;
  /**
   * Point `requests_in_flight` at the proxy's in-flight count (`proxy.maxInFlight`'s counter),
   * read at scrape time: no gauge update per request.
   */
  bindRequestsInFlight(count: () => number): void;
}

/** What the store gauge reads at scrape time. */
export interface StoreGaugeSource {
  status(): { up: boolean };
}

export interface MetricsOptions {
  /** `createMetricsRegistry()`: prom-client keeps exemplars only there. */
  registry: MetricsRegistry;
  /** prom-client's process metrics (`collectDefaultMetrics`: CPU, memory, event loop lag, GC) under the same prefix. */
  defaultMetrics?: boolean;
}

/**
 * A counter's one label counted in plain numbers on the request path, handed to prom-client when
 * the counter is scraped (its `collect`): `inc` with labels hashes them at every call, which a
 * counter touched by every request need not pay.
 */
export class LabelTally {
  readonly #counts = new Map<string, number>();

  count(value: string): void {
    this.#counts.set(value, (this.#counts.get(value) ?? 0) + 1);
  }

  /** The counter's values: each label value counted, with its total. */
  counts(): ReadonlyMap<string, number> {
    return this.#counts;
  }
}

/** A counter with one label whose values are `tally`'s, read when it is scraped. */
function tallyCounter(
  tally: LabelTally,
  config: { name: string; help: string; label: string; registers: MetricsRegistry[] },
): Counter {
  const { label, ...rest } = config;
  return new Counter({
    ...rest,
    labelNames: [label],
    collect() {
      // The tally holds the totals: the counter is set to them, not added to.
      this.reset();
      for (const [value, count] of tally.counts()) this.inc({ [label]: value }, count);
    },
  });
}

interface Sources {
  token?: TokenGaugeSource;
  quota?: QuotaGaugeSource;
  inFlight: () => number;
}

/** The gauges read at scrape time from what `bind*` attached. */
function registerStateGauges(registers: MetricsRegistry[], sources: Sources): void {
  new Gauge({
    name: `${METRIC_PREFIX}token_age_seconds`,
    help: 'Age of the current access token in seconds, computed at scrape (0 while none is held).',
    registers,
    collect() {
      // An unlabelled gauge is always exposed; with no token held it reads 0 and
      // oauth_sidecar_token_ready says why (alert on token_ready, not on age).
      this.set(sources.token?.status().tokenAgeSeconds ?? 0);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}token_expires_in_seconds`,
    help: 'Seconds until the current access token expires (0 if none is held).',
    registers,
    collect() {
      this.set(sources.token?.status().expiresInSeconds ?? 0);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}token_ready`,
    help: '1 while a valid access token is held.',
    registers,
    collect() {
      this.set(sources.token?.status().ready === true ? 1 : 0);
    },
  });

  new Gauge({
    name: `${METRIC_PREFIX}upstream_cooldown_seconds`,
    help: 'Seconds left of the cooldown the API asked for with a 429/503 Retry-After (0 if none).',
    registers,
    collect() {
      this.set(sources.quota?.cooldownSecondsLeft() ?? 0);
    },
  });
}

function tokenMetrics(registers: MetricsRegistry[]) {
  return {
    tokenRequests: new Counter({
      name: `${METRIC_PREFIX}token_requests_total`,
      help: 'Token endpoint calls by grant and outcome.',
      labelNames: ['grant', 'outcome'] as const,
      registers,
    }),
    tokenRequestDuration: new Histogram({
      name: `${METRIC_PREFIX}token_request_duration_seconds`,
      help: 'Token endpoint latency in seconds.',
      labelNames: ['grant'] as const,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    tokenAdopted: new Counter({
      name: `${METRIC_PREFIX}token_adopted_total`,
      help: 'Token sets taken from the shared token store that another process obtained.',
      registers,
    }),
  };
}

function proxyMetrics(registers: MetricsRegistry[]) {
  return {
    upstreamRequests: new Counter({
      name: `${METRIC_PREFIX}upstream_requests_total`,
      help: 'Requests forwarded upstream, by method and status code (error for connect/reset/timeout).',
      labelNames: ['method', 'code'] as const,
      registers,
    }),
    upstreamRequestDuration: new Histogram({
      name: `${METRIC_PREFIX}upstream_request_duration_seconds`,
      help: 'Time to upstream response headers in seconds.',
      labelNames: ['method'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      enableExemplars: true,
      registers,
    }),
    upstreamUnauthorized: new Counter({
      name: `${METRIC_PREFIX}upstream_unauthorized_total`,
      help: '401 answers from the upstream, by whether the request was replayed with a renewed token.',
      labelNames: ['replayed'] as const,
      registers,
    }),
    proxyRejected: new Counter({
      name: `${METRIC_PREFIX}proxy_rejected_total`,
      help: 'Requests the sidecar answered itself, by error code.',
      labelNames: ['code'] as const,
      registers,
    }),
    cacheRequests: new Counter({
      name: `${METRIC_PREFIX}cache_requests_total`,
      help: 'Requests under a response cache rule, by result (hit, miss, bypass, coalesced, stale).',
      labelNames: ['result'] as const,
      registers,
    }),
    cacheShared: new Counter({
      name: `${METRIC_PREFIX}cache_shared_requests_total`,
      help: "The response cache's shared tier in the store, by result (hit, coalesced, miss, stored, error).",
      labelNames: ['result'] as const,
      registers,
    }),
    cacheBytes: new Gauge({
      name: `${METRIC_PREFIX}cache_bytes`,
      help: 'Bytes held by the response cache (stored bodies plus headers).',
      registers,
    }),
    rateLimitWait: new Histogram({
      name: `${METRIC_PREFIX}rate_limit_wait_seconds`,
      help: "Time a request admitted under upstream.rateLimit waited for its slot (0 when it did not wait), by its caller's priority.",
      labelNames: ['priority'] as const,
      buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers,
    }),
    quotaRequests: new Counter({
      name: `${METRIC_PREFIX}quota_requests_total`,
      help: "Requests under upstream.rateLimit, by caller (the configured ones, this sidecar's own, else other) and outcome (admitted, refused).",
      labelNames: ['caller', 'outcome'] as const,
      registers,
    }),
  };
}

/** `caller_auth_total{result}` (counted in the tally returned) and `caller_keys_age_seconds`. */
function callerAuthMetrics(registry: MetricsRegistry, keys: { ageSeconds(): number }): LabelTally {
  const registers = [registry];
  new Gauge({
    name: `${METRIC_PREFIX}caller_keys_age_seconds`,
    help: "Seconds since the callers' verification keys held were fetched (since start while none is): an alert when they cannot be refreshed for long.",
    registers,
    collect() {
      this.set(keys.ageSeconds());
    },
  });
  const tally = new LabelTally();
  tallyCounter(tally, {
    name: `${METRIC_PREFIX}caller_auth_total`,
    help: 'Proxied requests by caller verification result: verified (signature checked), remembered (a token verified before), forbidden (no rule allows it), or the check that refused the token (missing, malformed, algorithm, signature, unknown_key, claims, expired, not_yet_valid, keys_unavailable).',
    label: 'result',
    registers,
  });
  return tally;
}

export function createMetrics({ registry, defaultMetrics = true }: MetricsOptions): SidecarMetrics {
  const registers = [registry];
  const sources: Sources = { inFlight: () => 0 };
  registerStateGauges(registers, sources);
  let callerAuth: LabelTally | undefined;
  const metrics: SidecarMetrics = {
    registry,
    ...tokenMetrics(registers),
    ...proxyMetrics(registers),
    requestsInFlight: new Gauge({
      name: `${METRIC_PREFIX}requests_in_flight`,
      help: 'Proxied requests in progress.',
      registers,
      collect() {
        this.set(sources.inFlight());
      },
    }),
    bindTokenState(source) {
      sources.token = source;
    },
    bindStoreState(source) {
      if (registry.getSingleMetric(`${METRIC_PREFIX}token_store_up`) !== undefined) return;
      new Gauge({
        name: `${METRIC_PREFIX}token_store_up`,
        help: '1 while the shared token store answers within its bound; 0 while each process keeps its own token.',
        registers,
        collect() {
          this.set(source.status().up ? 1 : 0);
        },
      });
    },
    bindQuotaState(source) {
      sources.quota = source;
    },
    tracingSpansDropped() {
      const name = `${METRIC_PREFIX}tracing_spans_dropped_total`;
      return (
        (registry.getSingleMetric(name) as Counter<'reason'> | undefined) ??
        new Counter({
          name,
          help: 'Spans dropped: the export queue (OTEL_BSP_MAX_QUEUE_SIZE) was full (queue_full), the collector refused them (refused), or the export got no answer (export_failed).',
          labelNames: ['reason'],
          registers,
        })
      );
    },
    callerAuth(keys) {
      return (callerAuth ??= callerAuthMetrics(registry, keys));
    },
    bindRequestsInFlight(count) {
      sources.inFlight = count;
    },
  };
  // The process metrics: prom-client's defaults under the same prefix (docs/reference.md "Metrics").
  if (defaultMetrics) collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
  return metrics;
}
