/**
 * What the cache decided for a request that goes upstream, from `beforeUpstream` to
 * `upstreamAnswered`: pass it (only `Cache-Status`), invalidate on success, or fill an entry.
 */
import type { CacheRule } from '../../config/types.js';
import { hasNoBody } from '../request-body.js';
import type { ExchangeView } from '../stages.js';
import type { RequestDirective } from '../../http-fields/cache-control.js';
import { METHOD_OVERRIDE_FIELDS } from '../../http-fields/method-override.js';
import type { RequestHeaders, StoredAnswer } from './entries.js';
import type { Flight } from './flights.js';
import { CACHE_NAME } from './serve.js';

const INVALIDATING_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** What `beforeUpstream` decided for an exchange that goes upstream, for `upstreamAnswered`. */
export type Plan =
  /** Only `Cache-Status` is added: nothing is stored. */
  | { kind: 'pass'; member: string; stale: StoredAnswer | undefined }
  /** POST, PUT, PATCH, DELETE: a 2xx answer invalidates the path (RFC 9111 §4.4). */
  | { kind: 'unsafe'; member: string; path: string }
  /** A GET whose 200 answer may be stored; `stale` answers if the API cannot. */
  | {
      kind: 'fill';
      member: string;
      key: string;
      path: string;
      rule: CacheRule;
      headers: RequestHeaders;
      flight: Flight | undefined;
      generation: number;
      stale: StoredAnswer | undefined;
    };

export type FillPlan = Extract<Plan, { kind: 'fill' }>;

/**
 * The plan of a request that never reads or writes the cache (other methods, no-store, a GET
 * with a body or a method override), or undefined.
 */
export function bypassPlan(
  exchange: ExchangeView,
  path: string,
  directive: RequestDirective,
): Plan | undefined {
  const { req, method } = exchange;
  if (method !== 'GET' && method !== 'HEAD') {
    const member = `${CACHE_NAME}; fwd=method`;
    return INVALIDATING_METHODS.has(method)
      ? { kind: 'unsafe', member, path }
      : { kind: 'pass', member, stale: undefined };
  }
  // A GET with a body or a method override is not the resource's plain representation: such
  // a request neither reads nor writes the cache (a body could poison the entry for everyone).
  const tunnelled =
    !hasNoBody(req) || METHOD_OVERRIDE_FIELDS.some((name) => req.headers[name] !== undefined);
  if (directive !== 'no-store' && !tunnelled) return undefined;
  return { kind: 'pass', member: `${CACHE_NAME}; fwd=bypass`, stale: undefined };
}
