/**
 * A fill's answer (docs/response-cache.md "What is stored, and how it is served"): whether the
 * upstream's answer is stored at all (its status, lifetime, `Vary`, declared size), its copy
 * captured while it streams to its client (dropped once it outgrows `cache.maxEntryBytes` or the
 * room left in the cache), then stored here and, when this process holds the fleet's fill lease,
 * in the store; either way the fill settles and its waiters look again.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Clock } from '../../clock.js';
import { ageSeconds } from '../../http-fields/age.js';
import { varyFields } from '../../http-fields/cache-control.js';
import { clientResponseHeaders } from '../headers.js';
import type { BodyTap } from '../stages.js';
import { staleWindows, storableSeconds, type StaleWindows } from './directives.js';
import {
  answerSize,
  varyValuesOf,
  type CacheEntries,
  type RequestHeaders,
  type StoredAnswer,
} from './entries.js';
import type { FillPlan } from './plans.js';
import { withCacheStatus } from './serve.js';
import type { SharedTier } from './shared-tier.js';

/** What a capture keeps: the answer's headers, lifetime and the request values its `Vary` selects. */
export interface CaptureSpec {
  key: string;
  headers: OutgoingHttpHeaders;
  requestHeaders: RequestHeaders;
  seconds: number;
  /** The API's own `Age`: the answer is that old on arrival (RFC 9111 §4.2.3). */
  ageSeconds: number;
  stale: StaleWindows;
  vary: string[];
}

export interface CaptureTarget {
  entries: CacheEntries;
  maxEntryBytes: number;
  now(): number;
  /** The capture is over: `answer` arrived whole (undefined: cut short, or it outgrew the limit). */
  captured(answer: StoredAnswer | undefined): void;
  /** A chunk arrived and was kept: `size` bytes of the body so far. */
  progress?(size: number): void;
}

/** Fields the sidecar sets per answer; never stored. */
const PER_ANSWER_FIELDS = ['x-request-id', 'age', 'cache-status', 'ratelimit', 'ratelimit-policy'];

/**
 * What of the upstream's answer head a fill keeps, or undefined when it is not stored: not a
 * 200, a cookie (one caller's, RFC 9111 §7.3), no lifetime, `Vary: *`, or declared too large.
 */
export function captureSpec(
  plan: FillPlan,
  status: number,
  headers: IncomingHttpHeaders,
  limits: {
    maxEntryBytes: number;
    stale: StaleWindows;
    now: number;
    /** The upstream's own `Cache-Status`, kept with the answer (the sidecar's is per answer). */
    upstreamCacheStatus: string | string[] | undefined;
  },
): CaptureSpec | undefined {
  if (status !== 200 || headers['set-cookie'] !== undefined) return undefined;
  const cacheControl = headers['cache-control'];
  const freshness = { cacheControl, expires: headers.expires, date: headers.date };
  const seconds = storableSeconds(plan.rule.ttlSeconds, freshness, limits.now);
  const vary = seconds > 0 ? varyFields(headers.vary) : undefined;
  if (vary === undefined || Number(headers['content-length'] ?? 0) > limits.maxEntryBytes) {
    return undefined;
  }
  const stored = clientResponseHeaders(headers, '');
  for (const name of PER_ANSWER_FIELDS) delete stored[name];
  if (limits.upstreamCacheStatus !== undefined) {
    stored['cache-status'] = limits.upstreamCacheStatus;
  }
  const stale = staleWindows(limits.stale, cacheControl);
  // Older on arrival than its lifetime and every stale window: nothing it could ever answer.
  const age = ageSeconds(headers.age);
  if (age >= seconds + Math.max(stale.ifError, stale.whileRevalidate)) return undefined;
  return {
    key: plan.key,
    headers: stored,
    requestHeaders: plan.headers,
    seconds,
    ageSeconds: age,
    stale,
    vary,
  };
}

export function capture(target: CaptureTarget, spec: CaptureSpec): BodyTap {
  const { entries } = target;
  const varyValues = varyValuesOf(spec.vary, spec.requestHeaders);
  let chunks: Buffer[] = [];
  let size = 0;
  let active = true;
  const stop = (answer?: StoredAnswer) => {
    if (!active) return;
    active = false;
    entries.release(size);
    chunks = [];
    target.captured(answer);
  };
  return {
    chunk(data) {
      if (!active) return;
      if (size + data.length > target.maxEntryBytes || !entries.reserve(data.length)) {
        stop();
        return;
      }
      chunks.push(data);
      size += data.length;
      target.progress?.(size);
    },
    owning: () => active,
    end(complete) {
      if (!active) return;
      if (!complete) {
        stop();
        return;
      }
      // A copy of its own: a chunk may be a view into a larger read buffer, which the entry
      // would keep alive unaccounted.
      const body = Buffer.allocUnsafeSlow(size);
      let at = 0;
      for (const chunk of chunks) at += chunk.copy(body, at);
      const now = target.now();
      const headers = { ...spec.headers, 'content-length': String(body.length) };
      // Its age counts from when the API's cache got it: the lifetime is from then, and hits
      // report the age it has reached (RFC 9111 §4.2.3).
      const storedAt = now - spec.ageSeconds * 1000;
      const expiresAt = storedAt + spec.seconds * 1000;
      stop({
        headers,
        body,
        storedAt,
        expiresAt,
        staleIfErrorUntil: expiresAt + spec.stale.ifError * 1000,
        staleWhileRevalidateUntil: expiresAt + spec.stale.whileRevalidate * 1000,
        vary: spec.vary,
        varyValues,
        size: answerSize(spec.key, headers, body.length, spec.vary, varyValues),
      });
    },
  };
}

export interface FillsOptions {
  entries: CacheEntries;
  /** `cache.maxEntryBytes`. */
  maxEntryBytes: number;
  windows: StaleWindows;
  clock: Pick<Clock, 'now'>;
  /** With `cache.shared`: the fleet's tier. */
  shared: SharedTier | undefined;
  /** The cache's invalidation count now: an answer whose request began before the latest is not stored. */
  generation: () => number;
}

export class Fills {
  readonly #o: FillsOptions;

  constructor(options: FillsOptions) {
    this.#o = options;
  }

  /**
   * The upstream's answer head for `p`: a tap capturing it, or undefined when it is not stored
   * (the fill is over). `headers` get the `Cache-Status` member the client sees.
   */
  answered(
    p: FillPlan,
    status: number,
    headers: IncomingHttpHeaders,
    upstreamCacheStatus: string | string[] | undefined,
  ): BodyTap | undefined {
    const { entries, maxEntryBytes, clock } = this.#o;
    const spec = captureSpec(p, status, headers, {
      maxEntryBytes,
      stale: this.#o.windows,
      now: clock.now(),
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
      entries,
      maxEntryBytes,
      now: () => clock.now(),
      captured: (answer: StoredAnswer | undefined) => this.#captured(p, answer),
      progress: p.flight && this.#o.shared?.capturing(p.key, p.flight, declared),
    };
    return capture(target, spec);
  }

  /** A fill's capture is over: store what arrived whole, here and (holding the lease) in the fleet. */
  #captured(p: FillPlan, answer: StoredAnswer | undefined): void {
    if (answer !== undefined && this.#o.generation() === p.generation) {
      this.#o.entries.put(p.key, p.path, answer);
      const lease = p.flight?.lease;
      if (lease !== undefined && this.#o.shared?.share(p.key, p.path, answer, lease.generation)) {
        p.flight!.shared = true;
      }
    }
    p.flight?.settle();
  }
}
