/**
 * The cache's side of the fleet's store (docs/response-cache.md "Shared tier"): an entry's form in
 * the store and back, the read of a local miss (which takes the fleet's fill lease for the key or,
 * while another member holds it, waits for that member's entry), the lease's life while this
 * process fills (renewed, given back), the write of a filled answer, and invalidation. What the
 * request path then does with a read is response-cache.ts's. The store's failure is a miss, never
 * a failed request.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { systemClock, type Clock } from '../../clock.js';
import { ageSeconds } from '../../http-fields/age.js';
import type { SharedAnswer, SharedCacheEntries } from '../../fleet/ports.js';
import type { SidecarMetrics } from '../../telemetry/metrics.js';
import { answerSize, selects, type RequestHeaders, type StoredAnswer } from './entries.js';
import type { Flight } from './flights.js';

/** The first wait for another member's fill; each next one is half as long again, up to the last. */
const FIRST_POLL_MS = 50;
const LAST_POLL_MS = 500;

export interface SharedLookup {
  /** The store's entry for this request (fresh or stale), if any. */
  answer: StoredAnswer | undefined;
  /** This process holds the fleet's fill lease: it asks the API and writes the entry. */
  lease: { generation: string } | undefined;
  /** Another member is filling the key and this request did not wait for it. */
  held: boolean;
}

/** A fill holding the fleet's lease, as the renewal sees it. */
export type LeasedFill = Pick<Flight, 'settled' | 'lease' | 'captured' | 'progressAt'>;

/** Who is asking: a request of this process, with this process's own rules. */
export interface Asking {
  headers: RequestHeaders;
  /**
   * The longest this process keeps an answer fresh (its rule's TTL) and its stale windows: an
   * entry another member wrote under longer ones is cut to these.
   */
  limits: { freshMs: number; staleIfErrorMs: number; staleWhileRevalidateMs: number };
  /** A stale entry that may answer at once (stale-while-revalidate): no need to wait for a fill. */
  staleOk(answer: StoredAnswer): boolean;
  /** The client left: stop waiting. */
  gone(): boolean;
}

export interface SharedTierOptions {
  entries: SharedCacheEntries;
  /** `cache.maxSharedEntryBytes`: larger bodies stay local. */
  maxEntryBytes: number;
  /**
   * The longest a request waits for another member's fill (`upstream.timeoutMs` +
   * `upstream.bodyTimeoutMs`), however long that member keeps renewing its lease.
   */
  maxWaitMs: number;
  now: () => number;
  /** The poll and lease-renewal timers' clock (the real one unless a test gives its own). */
  clock?: Pick<Clock, 'setTimeout'>;
  metrics: Pick<SidecarMetrics, 'cacheShared'>;
}

/**
 * The entry as the store keeps it. An answer already old when written (the API's `Age`) carries
 * that age as `age`, and `freshMs` is what is left of its lifetime from then.
 */
function toShared(answer: StoredAnswer, now: number): SharedAnswer {
  const ageMs = Math.max(0, Math.floor((now - answer.storedAt) / 1000)) * 1000;
  const headers = answer.headers as Record<string, string | string[]>;
  return {
    headers: ageMs === 0 ? headers : { ...headers, age: String(ageMs / 1000) },
    body: answer.body,
    freshMs: Math.max(0, answer.expiresAt - answer.storedAt - ageMs),
    staleIfErrorMs: answer.staleIfErrorUntil - answer.expiresAt,
    staleWhileRevalidateMs: answer.staleWhileRevalidateUntil - answer.expiresAt,
    vary: answer.vary.slice(),
    varyValues: answer.varyValues.map((value) => value ?? null),
  };
}

/** The store's entry as the local tier keeps it, if it suits this request's `Vary` fields. */
function toStored(
  key: string,
  shared: SharedAnswer,
  ageMs: number,
  asking: Asking,
  now: number,
): StoredAnswer | undefined {
  const { headers, limits } = asking;
  const { vary, varyValues } = shared;
  if (!Array.isArray(vary) || !Array.isArray(varyValues) || vary.length !== varyValues.length)
    return undefined;
  // JSON has no undefined: an absent field travels as null.
  const values = varyValues.map((value) => value ?? undefined);
  if (!selects(vary, values, headers)) return undefined;
  const windows = [shared.freshMs, shared.staleIfErrorMs, shared.staleWhileRevalidateMs];
  if (!windows.every((ms) => Number.isSafeInteger(ms) && ms >= 0)) return undefined;
  // `age`: how old it was when written; its own lifetime (the reader's cap) counts from before.
  const writtenAt = now - ageMs;
  const { age, ...answerHeaders } = shared.headers as OutgoingHttpHeaders;
  const oldMs = ageSeconds(typeof age === 'number' ? String(age) : age) * 1000;
  const storedAt = writtenAt - oldMs;
  const expiresAt = Math.min(writtenAt + shared.freshMs, storedAt + limits.freshMs);
  return {
    headers: answerHeaders,
    body: shared.body,
    storedAt,
    expiresAt,
    staleIfErrorUntil: expiresAt + Math.min(shared.staleIfErrorMs, limits.staleIfErrorMs),
    staleWhileRevalidateUntil:
      expiresAt + Math.min(shared.staleWhileRevalidateMs, limits.staleWhileRevalidateMs),
    vary,
    varyValues: values,
    size: answerSize(key, answerHeaders, shared.body.length, vary, values),
  };
}

export class SharedTier {
  constructor(private readonly options: SharedTierOptions) {}

  /**
   * The store's entry for `key`, taking the fill lease unless it is fresh. While another member
   * holds the lease, wait for its entry (up to `maxWaitMs`, or until the client is gone),
   * unless a stale entry may answer at once. Undefined: the store failed (a miss).
   */
  async lookup(key: string, path: string, asking: Asking): Promise<SharedLookup | undefined> {
    const { entries, now } = this.options;
    const clock = this.options.clock ?? systemClock;
    const metrics = this.options.metrics.cacheShared;
    const deadline = now() + this.options.maxWaitMs;
    let delay = FIRST_POLL_MS;
    for (let waited = false; ; waited = true) {
      let read;
      try {
        read = await entries.read(key, path, true);
      } catch {
        metrics.inc({ result: 'error' });
        return undefined;
      }
      const at = now();
      const answer = read.answer && toStored(key, read.answer, read.ageMs, asking, at);
      if (answer !== undefined && answer.expiresAt > at) {
        metrics.inc({ result: waited ? 'coalesced' : 'hit' });
        return { answer, lease: undefined, held: false };
      }
      if (read.lease !== 'held') {
        metrics.inc({ result: 'miss' });
        const lease = read.lease === 'taken' ? { generation: read.generation } : undefined;
        return { answer, lease, held: false };
      }
      const staleOk = answer !== undefined && asking.staleOk(answer);
      if (staleOk || asking.gone() || at + delay > deadline) {
        metrics.inc({ result: 'miss' });
        return { answer, lease: undefined, held: true };
      }
      await new Promise<void>((resolve) => clock.setTimeout(resolve, delay).unref?.());
      delay = Math.min(LAST_POLL_MS, Math.round(delay * 1.5));
    }
  }

  /**
   * Write a filled answer to the store (the write gives the lease back). False when it stays
   * local (too large): the caller gives the lease back.
   */
  share(key: string, path: string, answer: StoredAnswer, generation: string): boolean {
    if (answer.body.length > this.options.maxEntryBytes) return false;
    this.options.entries.write(key, path, toShared(answer, this.options.now()), generation).then(
      () => this.options.metrics.cacheShared.inc({ result: 'stored' }),
      () => this.options.metrics.cacheShared.inc({ result: 'error' }),
    );
    return true;
  }

  release(key: string): void {
    this.options.entries.release(key).catch(() => undefined);
  }

  /**
   * Give `fill`'s lease back now: its answer turned out too large for the store (or not storable),
   * so the other members need not wait for an entry that will never come.
   */
  giveBack(key: string, fill: LeasedFill): void {
    if (fill.lease === undefined) return;
    fill.lease = undefined;
    this.release(key);
  }

  /**
   * A fill holding the lease starts capturing an answer of `declaredBytes` (0: not declared). Too
   * large for the store, declared or once its body grows past the limit: the lease goes back at
   * once. Returns what the capture calls per chunk kept (the fill's progress, which renews it).
   */
  capturing(key: string, fill: LeasedFill, declaredBytes: number) {
    const { now, maxEntryBytes } = this.options;
    if (fill.lease === undefined) return undefined;
    fill.progressAt = now();
    if (declaredBytes > maxEntryBytes) this.giveBack(key, fill);
    return (size: number): void => {
      fill.progressAt = now();
      if (size > maxEntryBytes) this.giveBack(key, fill);
    };
  }

  /**
   * Renew `fill`'s lease every third of its TTL while the fill makes progress: waiting for the
   * answer's head (bounded by `upstream.timeoutMs`), or its body arriving. A fill whose body stalls
   * for a lease TTL lets the lease lapse, as does a member that dies or stalls: another member
   * takes it within a TTL (docs/response-cache.md "Shared tier"). Stops once the fill is over, its
   * lease given back, or renewing finds it another member's.
   */
  keep(key: string, fill: LeasedFill): void {
    const { entries, now } = this.options;
    const clock = this.options.clock ?? systemClock;
    const ttl = entries.leaseTtlMs;
    const everyMs = Math.max(1, Math.floor(ttl / 3));
    let stopped = false;
    const tick = (): void => {
      if (stopped || fill.settled || fill.lease === undefined) return;
      if (!(fill.captured && now() - fill.progressAt >= ttl)) {
        entries.renew(key).then(
          (held) => {
            if (!held) stopped = true;
          },
          () => undefined, // the store failed: the next tick tries again, the TTL bounds the rest
        );
      }
      clock.setTimeout(tick, everyMs).unref?.();
    };
    clock.setTimeout(tick, everyMs).unref?.();
  }

  invalidate(path: string): void {
    this.options.entries
      .invalidate(path)
      .catch(() => this.options.metrics.cacheShared.inc({ result: 'error' }));
  }
}
