/**
 * The cache's entries (not the fleet store): an LRU (lru-cache) bounded by bytes. One slot per
 * primary key (path, raw query, `Accept`, `Accept-Encoding`); a slot holds the variants its
 * answers' `Vary` fields select (RFC 9111 §4.1). Freshness is judged here against the injected
 * clock, so lru-cache's own TTL machinery (and its timers) stay unused.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { LRUCache } from 'lru-cache';

/**
 * What one variant costs beyond the bytes of its body, header text, key and Vary values: the
 * objects, arrays, LRU node, index entries and body allocation around them. Measured with the
 * bundle by bench/cache-memory.mjs (a sidecar's heap + external after a full GC, less the same
 * flood without a cache, per entry held); the figures are in docs/response-cache.md "Memory".
 */
export const VARIANT_OVERHEAD_BYTES = 896;
/** Different `Vary` selections kept per primary key; the oldest goes first beyond it. */
export const MAX_VARIANTS = 8;

export interface StoredAnswer {
  /** Client-facing headers without `X-Request-Id` and `Age`, with `Content-Length`. */
  readonly headers: OutgoingHttpHeaders;
  readonly body: Buffer;
  readonly storedAt: number;
  /** End of freshness. */
  readonly expiresAt: number;
  /** Ends of the windows in which it may still answer once stale (RFC 5861); `expiresAt` for none. */
  readonly staleIfErrorUntil: number;
  readonly staleWhileRevalidateUntil: number;
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
  /**
   * The matching answer outlived its freshness (`fwd=stale`): `answer` while a stale window
   * still allows it to answer (RFC 5861), else it is dropped.
   */
  | { kind: 'stale'; answer: StoredAnswer | undefined };

export interface EntryLimits {
  /** Everything the entries hold, all together ({@link answerSize}). */
  maxBytes: number;
  /** Variants held at once, all keys together. */
  maxEntries?: number;
}

export interface CacheEntries {
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

/** The end of the last window in which an answer may still answer. */
function staleUntil(answer: StoredAnswer): number {
  return Math.max(answer.staleIfErrorUntil, answer.staleWhileRevalidateUntil);
}

/** Whether a request selects an answer stored with these `Vary` fields and values. */
export function selects(
  vary: readonly string[],
  varyValues: readonly (string | undefined)[],
  headers: RequestHeaders,
): boolean {
  for (let i = 0; i < vary.length; i++) {
    if (headerText(headers[vary[i]!]) !== varyValues[i]) return false;
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

export function createCacheEntries(
  limits: EntryLimits,
  onChange: (bytes: number) => void = () => {},
): CacheEntries {
  return new LruEntries(limits, onChange);
}

const uriOf = (key: string): string => key.slice(0, key.indexOf('\n'));

class LruEntries implements CacheEntries {
  // Primary keys per path, for invalidation without a scan of the whole cache; slots per path
  // and query, to tell `uri-miss` from `miss` without one either.
  readonly #byPath = new Map<string, Set<string>>();
  readonly #slotsPerUri = new Map<string, number>();
  readonly #lru: LRUCache<string, Slot>;
  readonly #maxEntries: number;
  #variantCount = 0;
  #pending = 0;

  constructor(
    private readonly limits: EntryLimits,
    private readonly onChange: (bytes: number) => void,
  ) {
    this.#maxEntries = limits.maxEntries ?? Number.POSITIVE_INFINITY;
    this.#lru = new LRUCache<string, Slot>({
      maxSize: limits.maxBytes,
      sizeCalculation: (slot) => slot.size,
      dispose: (slot, key, reason) => {
        this.#variantCount -= slot.variants.length;
        if (reason !== 'set') this.#unindex(key, slot.path);
      },
    });
  }

  lookup(key: string, path: string, headers: RequestHeaders, now: number): Lookup {
    const slot = this.#lru.get(key);
    if (!slot) return this.#slotsPerUri.has(uriOf(key)) ? { kind: 'miss' } : { kind: 'uri-miss' };
    const answer = slot.variants.find((v) => selects(v.vary, v.varyValues, headers));
    if (!answer) return { kind: 'vary-miss' };
    if (answer.expiresAt > now) return { kind: 'hit', answer };
    if (staleUntil(answer) > now) return { kind: 'stale', answer };
    this.#write(
      key,
      path,
      slot.variants.filter((v) => v !== answer),
    );
    return { kind: 'stale', answer: undefined };
  }

  put(key: string, path: string, answer: StoredAnswer): void {
    const kept = (this.#lru.peek(key)?.variants ?? []).filter((v) => !sameSelection(v, answer));
    this.#write(key, path, [answer, ...kept].slice(0, MAX_VARIANTS));
  }

  invalidatePath(path: string): void {
    const keys = this.#byPath.get(path);
    if (!keys) return;
    for (const key of [...keys]) this.#lru.delete(key);
    this.onChange(this.#lru.calculatedSize);
  }

  reserve(bytes: number): boolean {
    if (this.#pending + bytes > this.limits.maxBytes) return false;
    this.#pending += bytes;
    return true;
  }

  release(bytes: number): void {
    this.#pending -= bytes;
  }

  stats(): { entries: number; bytes: number; maxBytes: number } {
    return {
      entries: this.#variantCount,
      bytes: this.#lru.calculatedSize,
      maxBytes: this.limits.maxBytes,
    };
  }

  #unindex(key: string, path: string): void {
    const keys = this.#byPath.get(path);
    if (!keys?.delete(key)) return;
    if (keys.size === 0) this.#byPath.delete(path);
    const uri = uriOf(key);
    const left = (this.#slotsPerUri.get(uri) ?? 1) - 1;
    if (left === 0) this.#slotsPerUri.delete(uri);
    else this.#slotsPerUri.set(uri, left);
  }

  #index(key: string, path: string): void {
    let keys = this.#byPath.get(path);
    if (!keys) this.#byPath.set(path, (keys = new Set()));
    if (keys.has(key)) return;
    keys.add(key);
    const uri = uriOf(key);
    this.#slotsPerUri.set(uri, (this.#slotsPerUri.get(uri) ?? 0) + 1);
  }

  #write(key: string, path: string, variants: StoredAnswer[]): void {
    const lru = this.#lru;
    if (variants.length === 0) {
      lru.delete(key);
    } else {
      const size = variants.reduce((sum, v) => sum + v.size, 0);
      lru.set(key, { path, variants, size });
      if (lru.has(key)) {
        this.#variantCount += variants.length;
        this.#index(key, path);
        // The least recently used slots go until the count fits (never the one just written).
        while (this.#variantCount > this.#maxEntries && lru.size > 1) lru.pop();
      } else {
        // lru-cache refuses a slot larger than the whole cache and drops the old one (reason 'set').
        this.#unindex(key, path);
      }
    }
    this.onChange(lru.calculatedSize);
  }
}
