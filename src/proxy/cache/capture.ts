/**
 * A storable answer captured while it streams to its client; the copy is dropped once it
 * outgrows `cache.maxEntryBytes` or the room left in the cache.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { BodyTap } from '../stages.js';
import type { StaleWindows } from './directives.js';
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
  stale: StaleWindows;
  vary: string[];
}

export interface CaptureTarget {
  entries: CacheEntries;
  maxEntryBytes: number;
  now(): number;
  /** The capture is over: `answer` arrived whole (undefined: cut short, or it outgrew the limit). */
  captured(answer: StoredAnswer | undefined): void;
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
      const expiresAt = now + spec.seconds * 1000;
      stop({
        headers,
        body,
        storedAt: now,
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
