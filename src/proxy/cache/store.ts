/**
 * Where cached answers live: an LRU (lru-cache) bounded by bytes, not by count. One slot per
 * primary key (path, raw query, `Accept`, `Accept-Encoding`); a slot holds the variants its
 * answers' `Vary` fields select (RFC 9111 §4.1). Freshness is judged here against the injected
 * clock, so lru-cache's own TTL machinery (and its timers) stay unused.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { LRUCache } from 'lru-cache';

/**
 * What one variant costs beyond the bytes of its body, header text, key and Vary values: the
 * objects, arrays, LRU node and index entries around them. Measured on Node 20 and 24 (20,000
 * entries, heap + external after GC, docs/response-cache.md "Memory"): 716 and 738 bytes.
 */
export const VARIANT_OVERHEAD_BYTES = 768;
/** Different `Vary` selections kept per primary key; the oldest goes first beyond it. */
export const MAX_VARIANTS = 8;

export interface StoredAnswer {
  /** Client-facing headers without `X-Request-Id` and `Age`, with `Content-Length`. */
  readonly headers: OutgoingHttpHeaders;
  readonly body: Buffer;
  readonly storedAt: number;
  readonly expiresAt: number;
  /** Request fields the answer's `Vary` names, lower-cased, sorted, with their values at store time. */
  readonly vary: readonly string[];
  readonly varyValues: readonly (string | undefined)[];
  readonly size: number;
}

interface Slot {
  readonly path: string;
  readonly variants: readonly StoredAnswer[];
  readonly size: number;
}

export type RequestHeaders = Record<string, string | string[] | undefined>;

export type Lookup =
  | { kind: 'hit'; answer: StoredAnswer }
  /** Nothing stored under this path and query (RFC 9211 `fwd=uri-miss`). */
  | { kind: 'uri-miss' }
  /**
   * Something is stored for the path and query, but for another `Accept`/`Accept-Encoding`
   * (`fwd=miss`: not a miss RFC 9211 has a narrower name for).
   */
  | { kind: 'miss' }
  /** Answers are stored for this key, but their `Vary` fields select none for this request. */
  | { kind: 'vary-miss' }
  /** The matching answer outlived its lifetime; it is dropped (`fwd=stale`). */
  | { kind: 'stale' };

export interface StoreLimits {
  /** Everything the entries hold, all together ({@link answerSize}). */
  maxBytes: number;
  /** Variants held at once, all keys together. */
  maxEntries?: number;
}

export interface ResponseStore {
  lookup(key: string, path: string, headers: RequestHeaders, now: number): Lookup;
  put(key: string, path: string, answer: StoredAnswer): void;
  /** Drop every entry of `path`, whatever its query and variants (RFC 9111 §4.4). */
  invalidatePath(path: string): void;
  /**
   * Reserve room for an answer being captured, so captures in progress cannot hold more than
   * `maxBytes` between them. False: no room, do not capture.
   */
  reserve(bytes: number): boolean;
  release(bytes: number): void;
  stats(): { entries: number; bytes: number; maxBytes: number };
}

function headerText(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : value;
}

/** Values of `fields` in a request, in order (undefined where absent). */
export function varyValuesOf(
  fields: readonly string[],
  headers: RequestHeaders,
): (string | undefined)[] {
  return fields.map((name) => headerText(headers[name]));
}

function matches(answer: StoredAnswer, headers: RequestHeaders): boolean {
  for (let i = 0; i < answer.vary.length; i++) {
    if (headerText(headers[answer.vary[i]!]) !== answer.varyValues[i]) return false;
  }
  return true;
}

function sameSelection(a: StoredAnswer, b: StoredAnswer): boolean {
  return (
    a.vary.length === b.vary.length &&
    a.vary.every((name, i) => name === b.vary[i] && a.varyValues[i] === b.varyValues[i])
  );
}

/**
 * Bytes an answer holds: body, header names and values, key, the Vary names and the request
 * values they selected (a client can make those large), and bookkeeping.
 */
export function answerSize(
  key: string,
  headers: OutgoingHttpHeaders,
  bodyBytes: number,
  vary: readonly string[],
  varyValues: readonly (string | undefined)[] = [],
): number {
  let size = VARIANT_OVERHEAD_BYTES + key.length + bodyBytes;
  for (const [name, value] of Object.entries(headers)) {
    size += name.length + (Array.isArray(value) ? value.join('').length : String(value).length);
  }
  for (const name of vary) size += name.length * 2;
  for (const value of varyValues) size += value?.length ?? 0;
  return size;
}

export function createResponseStore(
  limits: StoreLimits,
  onChange: (bytes: number) => void = () => {},
): ResponseStore {
  // Primary keys per path, for invalidation without a scan of the whole cache; slots per path
  // and query, to tell `uri-miss` from `miss` without one either.
  const byPath = new Map<string, Set<string>>();
  const slotsPerUri = new Map<string, number>();
  let variantCount = 0;
  let pending = 0;

  const uriOf = (key: string) => key.slice(0, key.indexOf('\n'));

  function unindex(key: string, path: string): void {
    const keys = byPath.get(path);
    if (!keys?.delete(key)) return;
    if (keys.size === 0) byPath.delete(path);
    const uri = uriOf(key);
    const left = (slotsPerUri.get(uri) ?? 1) - 1;
    if (left === 0) slotsPerUri.delete(uri);
    else slotsPerUri.set(uri, left);
  }

  function index(key: string, path: string): void {
    let keys = byPath.get(path);
    if (!keys) byPath.set(path, (keys = new Set()));
    if (keys.has(key)) return;
    keys.add(key);
    const uri = uriOf(key);
    slotsPerUri.set(uri, (slotsPerUri.get(uri) ?? 0) + 1);
  }

  const lru = new LRUCache<string, Slot>({
    maxSize: limits.maxBytes,
    sizeCalculation: (slot) => slot.size,
    dispose: (slot, key, reason) => {
      variantCount -= slot.variants.length;
      if (reason !== 'set') unindex(key, slot.path);
    },
  });

  const maxEntries = limits.maxEntries ?? Number.POSITIVE_INFINITY;

  function write(key: string, path: string, variants: StoredAnswer[]): void {
    if (variants.length === 0) {
      lru.delete(key);
    } else {
      const size = variants.reduce((sum, v) => sum + v.size, 0);
      lru.set(key, { path, variants, size });
      if (lru.has(key)) {
        variantCount += variants.length;
        index(key, path);
        // The least recently used slots go until the count fits (never the one just written).
        while (variantCount > maxEntries && lru.size > 1) lru.pop();
      } else {
        // lru-cache refuses a slot larger than the whole cache and drops the old one (reason 'set').
        unindex(key, path);
      }
    }
    onChange(lru.calculatedSize);
  }

  return {
    lookup(key, path, headers, now) {
      const slot = lru.get(key);
      if (!slot) return slotsPerUri.has(uriOf(key)) ? { kind: 'miss' } : { kind: 'uri-miss' };
      const answer = slot.variants.find((v) => matches(v, headers));
      if (!answer) return { kind: 'vary-miss' };
      if (answer.expiresAt > now) return { kind: 'hit', answer };
      write(
        key,
        path,
        slot.variants.filter((v) => v !== answer),
      );
      return { kind: 'stale' };
    },

    put(key, path, answer) {
      const kept = (lru.peek(key)?.variants ?? []).filter((v) => !sameSelection(v, answer));
      const variants = [answer, ...kept].slice(0, MAX_VARIANTS);
      write(key, path, variants);
    },

    invalidatePath(path) {
      const keys = byPath.get(path);
      if (!keys) return;
      for (const key of [...keys]) lru.delete(key);
      onChange(lru.calculatedSize);
    },

    reserve(bytes) {
      if (pending + bytes > limits.maxBytes) return false;
      pending += bytes;
      return true;
    },

    release(bytes) {
      pending -= bytes;
    },

    stats() {
      return { entries: variantCount, bytes: lru.calculatedSize, maxBytes: limits.maxBytes };
    },
  };
}
