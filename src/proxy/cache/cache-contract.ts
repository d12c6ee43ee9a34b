/**
 * What the response cache (response-cache.ts) is given and what it reports: its options, the
 * metrics it feeds, and its `/status` shape (docs/reference.md "/status").
 */
import type { Clock } from '../../clock.js';
import type { Config } from '../../config/types.js';
import type { SharedCacheEntries } from '../../fleet/ports.js';
import type { SidecarMetrics } from '../../telemetry/metrics.js';
import type { ForwardStage } from '../stages.js';

export type CacheSettings = Config['cache'];
export type CacheMetrics = Pick<SidecarMetrics, 'cacheRequests' | 'cacheBytes' | 'cacheShared'>;

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
