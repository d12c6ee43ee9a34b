/**
 * Stale entries that answer (RFC 5861) on an injected clock: within stale-while-revalidate at
 * once with the key's one refresh; within stale-if-error instead of an upstream 5xx or the
 * sidecar's own error; past the windows, never. A hand-made store port logs lease releases.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { exchangeView } from '../../../test/helpers/exchange-view.js';
import { SidecarError } from '../../errors.js';
import { sharedStorePort } from '../../../test/helpers/shared-store-port.js';
import { createMetricsRegistry } from '../../telemetry/exposition.js';
import { createMetrics, type SidecarMetrics } from '../../telemetry/metrics.js';
import type { ForwardOutcome } from '../outcome.js';
import type { ExchangeView } from '../stages.js';
import type { StoredAnswer } from './entries.js';
import { Flights } from './flights.js';
import type { FillPlan, Plan } from './plans.js';
import { Refreshes } from './refresh.js';
import { SharedTier } from './shared-tier.js';
import { StaleAnswers } from './stale.js';

const T0 = 1_767_225_600_000;
/** Fresh for 10 s, then 20 s of stale-while-revalidate and 60 s of stale-if-error. */
const STALE: StoredAnswer = {
  headers: { 'content-length': '5' },
  body: Buffer.from('stale'),
  storedAt: T0,
  expiresAt: T0 + 10_000,
  staleWhileRevalidateUntil: T0 + 30_000,
  staleIfErrorUntil: T0 + 70_000,
  vary: [],
  varyValues: [],
  size: 100,
};

let now: number;
let metrics: SidecarMetrics;
let storeLog: string[];
let forwarded: string[];
let refreshes: Refreshes;

function staleAnswers(): StaleAnswers {
  const store = sharedStorePort();
  storeLog = store.log;
  const shared = new SharedTier({
    entries: store.port,
    maxEntryBytes: 1024,
    maxWaitMs: 5_000,
    now: () => now,
    metrics,
  });
  return new StaleAnswers({ clock: { now: () => now }, metrics, refreshes, shared });
}

function fill(stale: StoredAnswer | undefined, flight = new Flights(60_000, () => {}).start('k')) {
  const plan: FillPlan = {
    kind: 'fill',
    member: 'oauth-sidecar; fwd=stale',
    key: 'k',
    path: '/a',
    rule: { prefix: '/', ttlSeconds: 10 },
    headers: {},
    flight,
    generation: 0,
    stale,
  };
  return plan;
}

async function staleCount(): Promise<number> {
  const metric = await metrics.registry
    .getSingleMetric('oauth_sidecar_cache_requests_total')
    ?.get();
  return metric?.values.find((v) => v.labels.result === 'stale')?.value ?? 0;
}

beforeEach(() => {
  now = T0;
  metrics = createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false });
  storeLog = [];
  forwarded = [];
  refreshes = new Refreshes();
  refreshes.attach((exchange: ExchangeView) => {
    forwarded.push(exchange.target);
    return new Promise<ForwardOutcome>(() => {});
  });
});

describe('stale-while-revalidate', () => {
  it('answers at once, marked, and starts the one refresh, which takes the lease over', async () => {
    now = T0 + 12_000;
    const stale = staleAnswers();
    const first = exchangeView({ url: '/a?x=1' });
    stale.whileRevalidate(first, STALE, 'k', true, { generation: '3' });
    expect(first.fake.body).toBe('stale');
    expect(first.fake.headers['cache-status']).toBe(
      'oauth-sidecar; hit; ttl=-2; detail=stale-while-revalidate',
    );
    expect(forwarded).toEqual(['/a?x=1']);
    expect(storeLog).toEqual([]);
    // A second request for the key while its refresh is on its way: no second refresh.
    stale.whileRevalidate(exchangeView({ url: '/a?x=1' }), STALE, 'k', true, undefined);
    expect(forwarded).toHaveLength(1);
    expect(await staleCount()).toBe(2);
  });

  it('without a refresh of its own, a lease this process took goes back to the fleet', () => {
    now = T0 + 12_000;
    staleAnswers().whileRevalidate(exchangeView({ url: '/a' }), STALE, 'k', false, {
      generation: '3',
    });
    expect(forwarded).toEqual([]);
    expect(storeLog).toEqual(['release k']);
  });
});

describe('stale-if-error', () => {
  it('a 5xx from the API is answered with the entry within its window; its waiters are told', () => {
    now = T0 + 50_000;
    const plan = fill(STALE);
    const exchange = exchangeView({ url: '/a' });
    expect(staleAnswers().insteadOfStatus(exchange, plan, 503)).toEqual({ served: 200 });
    expect(exchange.fake.headers['cache-status']).toBe(
      'oauth-sidecar; hit; ttl=-40; fwd=stale; fwd-status=503; detail=stale-if-error',
    );
    expect(plan.flight?.staleUse).toEqual({ forwarded: true, status: 503 });
    expect(plan.flight?.settled).toBe(true);
  });

  it('other statuses, unsafe methods, no entry and the end of the window pass the answer on', () => {
    now = T0 + 50_000;
    const stale = staleAnswers();
    const exchange = exchangeView({ url: '/a' });
    expect(stale.insteadOfStatus(exchange, fill(STALE), 404)).toBeUndefined();
    expect(stale.insteadOfStatus(exchange, fill(undefined), 503)).toBeUndefined();
    const unsafe: Plan = { kind: 'unsafe', member: 'm', path: '/a' };
    expect(stale.insteadOfStatus(exchange, unsafe, 503)).toBeUndefined();
    now = T0 + 70_000;
    expect(stale.insteadOfStatus(exchange, fill(STALE), 503)).toBeUndefined();
    expect(exchange.fake.headersSent).toBe(false);
  });

  it("the sidecar's own errors: fwd=stale only where the API was asked", () => {
    now = T0 + 20_000;
    const stale = staleAnswers();
    const cases: [SidecarError['code'], string | undefined][] = [
      ['upstream_unreachable', '; fwd=stale'],
      ['upstream_timeout', '; fwd=stale'],
      ['upstream_unavailable', ''],
      ['upstream_rate_limited', ''],
      ['token_unavailable', ''],
      ['overloaded', undefined],
      ['internal_error', undefined],
    ];
    for (const [code, fwd] of cases) {
      const exchange = exchangeView({ url: '/a' });
      const outcome = stale.insteadOfError(exchange, fill(STALE), new SidecarError(code, 'x'));
      if (fwd === undefined) {
        expect(outcome, code).toBeUndefined();
      } else {
        expect(outcome?.status, code).toBe(200);
        expect(exchange.fake.headers['cache-status'], code).toBe(
          `oauth-sidecar; hit; ttl=-10${fwd}; detail=stale-if-error`,
        );
      }
    }
  });

  it('a client that left gets nothing, and nothing is counted', async () => {
    now = T0 + 20_000;
    const exchange = exchangeView({ url: '/a' });
    exchange.fake.leave();
    const error = new SidecarError('upstream_timeout', 'slow');
    expect(staleAnswers().insteadOfError(exchange, fill(STALE), error)).toBeUndefined();
    expect(await staleCount()).toBe(0);
  });
});
