/**
 * The optional features in effect, as one line for the start-up log and `check`
 * (docs/reference.md "Logs"). Built from the loaded configuration; no secret reaches it: the store
 * URL loses its password, the egress proxy its user-info, the tracing endpoint shows its origin only,
 * headers are not shown.
 */
import { redactStoreUrl } from '../store-url.js';
import { egressSummary } from './egress.js';
import type { Config, RateLimit } from './types.js';

export interface Features {
  cache: string;
  rateLimit: string;
  callers: string;
  store: string;
  tracing: string;
  egressProxy: string;
}

/** Each optional feature, `off` or what it is set to. */
export function featuresInEffect(config: Config): Features {
  return {
    cache: cacheFeature(config.cache),
    rateLimit:
      config.upstream.rateLimit === undefined
        ? 'off'
        : `${perPeriod(config.upstream.rateLimit)} (queue ${config.upstream.queueMs} ms)`,
    callers: callersFeature(config.quota, config.callers),
    store:
      config.store.url === undefined
        ? 'off'
        : `${redactStoreUrl(config.store.url)}${config.store.mode === 'standalone' ? '' : ` (${config.store.mode})`}`,
    tracing: tracingFeature(config.tracing),
    egressProxy: egressFeature(config),
  };
}

/** `cache rules: off; rate limit: 2/m (queue 2000 ms); callers: all as "default"; store: off; …` */
export function featureLine(config: Config): string {
  const features = featuresInEffect(config);
  return [
    `cache rules: ${features.cache}`,
    `rate limit: ${features.rateLimit}`,
    `callers: ${features.callers}`,
    `store: ${features.store}`,
    `tracing: ${features.tracing}`,
    `egress proxy: ${features.egressProxy}`,
  ].join('; ');
}

function cacheFeature(cache: Config['cache']): string {
  if (cache.rules.length === 0) return 'off';
  const rules = cache.rules.map((rule) => `${rule.prefix}=${rule.ttlSeconds}s`).join(', ');
  return `${rules} (${cache.shared ? 'shared' : 'local'})`;
}

/** How many named callers' weights the line shows before `+N more`. */
const CALLERS_SHOWN = 5;

/**
 * Who the rate limit's fair share sees: `all as "default"`; `by header x-caller, else "billing"`;
 * then `, weighted billing=3 reports=1:batch` (QUOTA_CALLERS' own syntax) when callers are listed.
 */
function callersFeature(quota: Config['quota'], callers: Config['callers']): string {
  const who =
    callers.auth === 'jwt'
      ? `verified by token (jwt, issuer ${callers.jwt.issuer}, ${callers.rules.length} rules)`
      : quota.callerHeader === undefined
        ? `all as "${quota.caller}"`
        : `by header ${quota.callerHeader}, else "${quota.caller}"`;
  if (quota.callers.length === 0) return who;
  const listed = quota.callers
    .slice(0, CALLERS_SHOWN)
    .map(
      ({ name, weight, priority }) => `${name}=${weight}${priority === 'batch' ? ':batch' : ''}`,
    );
  const more = quota.callers.length - listed.length;
  return `${who}, weighted ${listed.join(' ')}${more > 0 ? ` +${more} more` : ''}`;
}

/** `http://***@proxy:3128 (api through it, token endpoint direct)`: the user-info masked. */
function egressFeature(config: Config): string {
  const summary = egressSummary(config.egress, config.upstream.baseUrl, config.token.url);
  if (summary === undefined) return 'off';
  const route = (how: string): string => (how === 'direct' ? 'direct' : 'through it');
  const proxy = summary.proxy ?? summary.httpProxy;
  return `${proxy} (api ${route(summary.api)}, token endpoint ${route(summary.tokenEndpoint)})`;
}

function tracingFeature(tracing: Config['tracing']): string {
  if (tracing === undefined) return 'off';
  return `${new URL(tracing.url).origin} (${tracing.protocol}, ${tracing.sampler})`;
}

const PERIODS: readonly (readonly [number, string])[] = [
  [1_000, 's'],
  [60_000, 'm'],
  [3_600_000, 'h'],
];

function perPeriod({ count, periodMs }: RateLimit): string {
  const unit = PERIODS.find(([ms]) => ms === periodMs)?.[1];
  return unit === undefined ? `${count}/${periodMs} ms` : `${count}/${unit}`;
}
