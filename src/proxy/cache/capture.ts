/**
 * A storable answer captured while it streams to its client; the copy is dropped once it
 * outgrows `cache.maxEntryBytes` or the room left in the cache.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { ageSeconds } from '../../http-fields/age.js';
import { clientResponseHeaders } from '../headers.js';
import type { BodyTap } from '../stages.js';
import { varyFields } from '../../http-fields/cache-control.js';
import { staleWindows, storableSeconds, type StaleWindows } from './directives.js';
import type { FillPlan } from './plans.js';
import {
  answerSize,
  varyValuesOf,
  type CacheEntries,
  type RequestHeaders,
  type StoredAnswer,
} from './entries.js';

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
