/**
 * What the quota guard (guard.ts) is given and what it reports: its options, the metrics it
 * feeds, and its `/status` shape (docs/reference.md "/status").
 */
import type { Clock } from '../../clock.js';
import type { CooldownStatus, SharedQuota } from '../../fleet/ports.js';
import type { Logger } from '../../telemetry/logger.js';
import type { RateLimit } from './bucket.js';
import type { CallerStatus, Callers } from './callers.js';
import type { Priority } from './fair-queue.js';

export interface QuotaGuardMetrics {
  /** Observed once per request admitted under a rate limit: seconds it waited (0 if none). */
  rateLimitWait: { observe(labels: { priority: Priority }, seconds: number): void };
  /** Requests under a rate limit, by caller (bounded: callers.ts `label`) and outcome. */
  quotaRequests: { inc(labels: { caller: string; outcome: 'admitted' | 'refused' }): void };
}

export interface QuotaGuardOptions {
  rateLimit: RateLimit | undefined;
  /** Longest wait for a rate-limit slot (`upstream.queueMs`); then 429 `rate_limited`. */
  queueMs: number;
  /** Cap on a cooldown taken from `Retry-After` (`upstream.maxCooldownSeconds`). */
  maxCooldownSeconds: number;
  /** Most requests waiting at once (the proxy passes `proxy.maxInFlight`). Default 10000. */
  maxQueued?: number;
  clock: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;
  metrics: QuotaGuardMetrics;
  logger: Logger;
  /** The fleet-wide store half; absent: this process alone. */
  shared?: SharedQuota;
  /** How often the fleet cooldown is read from the store. */
  sharedPollMs?: number;
  /** Who shares the rate (`quota.*`); absent: one caller, `default`. */
  callers?: Callers;
}

/** JSON-safe guard state for `/status`. */
export interface QuotaStatus {
  cooldown: { status: CooldownStatus; secondsLeft: number; until: string } | null;
  rateLimit: {
    count: number;
    periodSeconds: number;
    queueMs: number;
    /** Whole slots in this process's bucket (the local one; the store's when fleet-wide). */
    tokens: number;
    queued: number;
    callers: CallerStatus[];
  } | null;
  /** `off`: no store; `store`: fleet-wide; `local`: store unreachable, this process limits alone. */
  fleet: 'off' | 'store' | 'local';
  storeError: string | null;
}
