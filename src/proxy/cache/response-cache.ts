/**
 * The opt-in response cache (docs/response-cache.md), as a stage of the request path
 * (proxy/stages.ts). `beforeUpstream` runs before the token is fetched: a hit is answered there
 * and costs no token, no rate-limit slot (the quota guard's stage comes after it) and no upstream
 * request. `upstreamAnswered` adds `Cache-Status` and captures a storable answer while it streams.
 * Paths outside every rule leave both hooks at once; without rules main.ts installs no stage.
 *
 * Safe only because one identity (the organisation's client) serves every caller: an answer the
 * API gave the sidecar is the answer it would give any caller of the sidecar.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Clock } from '../../clock.js';
import type { CacheRule, Config } from '../../config/types.js';
import type { SidecarMetrics } from '../../telemetry/metrics.js';
import { clientResponseHeaders } from '../headers.js';
import { CLIENT_GONE, keepAliveOf, type ClientResponse, type ForwardOutcome } from '../outcome.js';
import type { BodyTap, ExchangeView, ForwardStage, UpstreamHead } from '../stages.js';
import { hasNoBody } from '../request-body.js';
import {
  METHOD_OVERRIDE_FIELDS,
  normalizedPath,
  requestDirective,
  storableSeconds,
  varyFields,
} from './directives.js';
import {
  answerSize,
  createCacheEntries,
  type CacheEntries,
  varyValuesOf,
  type RequestHeaders,
  type StoredAnswer,
} from './entries.js';

export type CacheSettings = Config['cache'];
export type CacheMetrics = Pick<SidecarMetrics, 'cacheRequests' | 'cacheBytes'>;

/** Requests waiting for one upstream answer at most; further ones go upstream on their own. */
export const DEFAULT_MAX_WAITERS = 256;
/** The default upstream.timeoutMs + upstream.bodyTimeoutMs. */
const DEFAULT_MAX_WAIT_MS = 60_000;

export interface ResponseCacheOptions {
  settings: CacheSettings;
  clock: Pick<Clock, 'now'>;
  metrics: CacheMetrics;
  maxWaiters?: number;
  /**
   * The longest a request waits for an identical one's upstream answer: `upstream.timeoutMs` +
   * `upstream.bodyTimeoutMs` (the longest that answer may take); then it goes on its own.
   */
  maxWaitMs?: number;
}

export interface CacheStats {
  entries: number;
  bytes: number;
  maxBytes: number;
  rules: number;
  /** Requests waiting for an identical one on its way upstream. */
  waiting: number;
}

export interface ResponseCache extends ForwardStage {
  /** For /status. */
  stats(): CacheStats;
}

/** RFC 9211 cache identifier. */
const CACHE_NAME = 'oauth-sidecar';
const INVALIDATING_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Fields the sidecar sets per answer; never stored. */
const PER_ANSWER_FIELDS = ['x-request-id', 'age', 'cache-status', 'ratelimit', 'ratelimit-policy'];

/** RFC 9211 §2: each cache appends its member, so the one nearest the client comes last. */
function withCacheStatus(upstream: string | string[] | number | undefined, member: string): string {
  if (upstream === undefined) return member;
  const previous = Array.isArray(upstream) ? upstream.join(', ') : String(upstream);
  return previous ? `${previous}, ${member}` : member;
}

function headerText(value: string | string[] | undefined): string {
  if (value === undefined) return '';
  return Array.isArray(value) ? value.join(', ') : value;
}

/** An upstream GET in progress that identical requests wait for. */
interface Flight {
  waiters: number;
  settled: boolean;
  /**
   * Its requester left before the answer's head: nothing went wrong upstream, so the waiters
   * coalesce again behind one of them instead of each going upstream.
   */
  abandoned: boolean;
  /** A capture took over: only its end settles the flight (after the answer is stored). */
  captured: boolean;
  done: Promise<void>;
  /** Wake the waiters (they look the key up again) and stop accepting new ones. */
  settle(abandoned?: boolean): void;
}

/** Wait for `flight`, unless the client leaves first: then the waiter is dropped at once. */
function waitFor(flight: Flight, exchange: ExchangeView): Promise<'done' | 'gone'> {
  const { res } = exchange;
  if (exchange.clientGone()) return Promise.resolve('gone');
  flight.waiters += 1;
  return new Promise((resolve) => {
    let over = false;
    const finish = (how: 'done' | 'gone') => {
      if (over) return;
      over = true;
      res.off('close', onClose);
      flight.waiters -= 1;
      resolve(how);
    };
    const onClose = () => finish('gone');
    res.once('close', onClose);
    void flight.done.then(() => finish('done'));
  });
}

/** What `beforeUpstream` decided for an exchange that goes upstream, for `upstreamAnswered`. */
type Plan =
  /** Only `Cache-Status` is added: nothing is stored. */
  | { kind: 'pass'; member: string }
  /** POST, PUT, PATCH, DELETE: a 2xx answer invalidates the path (RFC 9111 §4.4). */
  | { kind: 'unsafe'; member: string; path: string }
  /** A GET whose 200 answer may be stored. */
  | {
      kind: 'fill';
      member: string;
      key: string;
      path: string;
      rule: CacheRule;
      headers: RequestHeaders;
      flight: Flight | undefined;
      generation: number;
    };

export function createResponseCache(options: ResponseCacheOptions): ResponseCache {
  return new Cache(options);
}

/** Capture a storable answer while it streams; the copy is dropped once it outgrows the limit. */
function capture(
  cache: { entries: CacheEntries; generation: number; maxEntryBytes: number; now(): number },
  p: Extract<Plan, { kind: 'fill' }>,
  seconds: number,
  vary: string[],
  stored: OutgoingHttpHeaders,
): BodyTap {
  const { entries } = cache;
  const varyValues = varyValuesOf(vary, p.headers);
  let chunks: Buffer[] = [];
  let size = 0;
  let active = true;
  const stop = () => {
    if (!active) return;
    active = false;
    entries.release(size);
    chunks = [];
    p.flight?.settle();
  };
  return {
    chunk(data) {
      if (!active) return;
      if (size + data.length > cache.maxEntryBytes || !entries.reserve(data.length)) {
        stop();
        return;
      }
      chunks.push(data);
      size += data.length;
    },
    owning: () => active,
    end(complete) {
      if (!active) return;
      // A copy of its own: a chunk may be a view into a larger read buffer, which the entry
      // would keep alive unaccounted.
      const body = Buffer.allocUnsafeSlow(size);
      let at = 0;
      for (const chunk of chunks) at += chunk.copy(body, at);
      if (complete && cache.generation === p.generation) {
        const now = cache.now();
        const headers = { ...stored, 'content-length': String(body.length) };
        entries.put(p.key, p.path, {
          headers,
          body,
          storedAt: now,
          expiresAt: now + seconds * 1000,
          vary,
          varyValues,
          size: answerSize(p.key, headers, body.length, vary, varyValues),
        });
      }
      stop();
    },
  };
}

class Cache implements ResponseCache {
  readonly entries: CacheEntries;
  readonly maxEntryBytes: number;
  /** Bumped by every invalidation: an answer whose request began before it is not stored. */
  generation = 0;
  readonly #settings: ResponseCacheOptions['settings'];
  readonly #clock: ResponseCacheOptions['clock'];
  readonly #metrics: ResponseCacheOptions['metrics'];
  readonly #maxWaiters: number;
  readonly #maxWaitMs: number;
  /** Longest prefix first: the most specific rule wins. */
  readonly #rules: CacheRule[];
  readonly #flights = new Map<string, Flight>();
  readonly #plans = new WeakMap<ExchangeView, Plan>();

  constructor(options: ResponseCacheOptions) {
    const { settings, metrics } = options;
    this.#settings = settings;
    this.#clock = options.clock;
    this.#metrics = metrics;
    this.#maxWaiters = options.maxWaiters ?? DEFAULT_MAX_WAITERS;
    this.#maxWaitMs = options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
    this.maxEntryBytes = settings.maxEntryBytes;
    this.#rules = [...settings.rules].sort((a, b) => b.prefix.length - a.prefix.length);
    this.entries = createCacheEntries(
      { maxBytes: settings.maxBytes, maxEntries: settings.maxEntries },
      (bytes) => metrics.cacheBytes.set(bytes),
    );
  }

  now(): number {
    return this.#clock.now();
  }

  stats(): CacheStats {
    let waiting = 0;
    for (const flight of this.#flights.values()) waiting += flight.waiters;
    return { ...this.entries.stats(), rules: this.#rules.length, waiting };
  }

  async beforeUpstream(exchange: ExchangeView): Promise<ForwardOutcome | undefined> {
    const { req, method, target } = exchange;
    const query = target.indexOf('?');
    const path = normalizedPath(query === -1 ? target : target.slice(0, query));
    const rule = this.#ruleFor(path);
    if (!rule) return undefined;
    const directive = requestDirective(req.headers['cache-control'], req.headers.pragma);
    const bypass = this.#bypass(exchange, path, directive);
    if (bypass !== undefined) return this.#plan(exchange, bypass);
    const uri = query === -1 ? path : `${path}${target.slice(query)}`;
    const key = `${uri}\n${headerText(req.headers.accept)}\n${headerText(req.headers['accept-encoding'])}`;
    const lookupStart = exchange.trace === undefined ? 0 : this.#clock.now();
    let fwd = 'request';
    let waited = false;
    // Waits behind a leader whose own requester left before the answer: each such round costs
    // one upstream request, so two rounds bound 1 + N callers at 2 (DESIGN "Bounded work").
    let handoffs = 0;
    // No await before the lead is taken: identical requests arriving together coalesce.
    while (directive === 'none') {
      const found = this.entries.lookup(key, path, req.headers, this.#clock.now());
      if (found.kind === 'hit') {
        const result = waited ? 'coalesced' : 'hit';
        this.#metrics.cacheRequests.inc({ result });
        this.#traceLookup(exchange, lookupStart, result);
        return this.#serve(found.answer, exchange);
      }
      fwd = found.kind;
      // Waited once already and the leader stored nothing usable: go upstream alone.
      const flight: Flight | undefined =
        method === 'GET' && !waited ? this.#flights.get(key) : undefined;
      if (!flight || flight.waiters >= this.#maxWaiters) break;
      if ((await waitFor(flight, exchange)) === 'gone') return CLIENT_GONE;
      waited = !(flight.abandoned && ++handoffs < 2);
    }
    this.#metrics.cacheRequests.inc({ result: 'miss' });
    this.#traceLookup(exchange, lookupStart, 'miss');
    const member = `${CACHE_NAME}; fwd=${fwd}`;
    if (method === 'HEAD') return this.#plan(exchange, { kind: 'pass', member });
    const flight = waited || this.#flights.has(key) ? undefined : this.#lead(exchange, key);
    return this.#plan(exchange, {
      kind: 'fill',
      member,
      key,
      path,
      rule,
      headers: req.headers,
      flight,
      generation: this.generation,
    });
  }

  upstreamAnswered(
    exchange: ExchangeView,
    status: number,
    head: UpstreamHead,
  ): BodyTap | undefined {
    const p = this.#plans.get(exchange);
    if (!p) return undefined;
    const headers = head.headers;
    const upstreamCacheStatus = headers['cache-status'];
    // The forwarder writes these headers to the client after this hook.
    headers['cache-status'] = withCacheStatus(upstreamCacheStatus, p.member);
    if (p.kind === 'unsafe' && status >= 200 && status < 300) {
      this.generation += 1;
      this.entries.invalidatePath(p.path);
    }
    if (p.kind !== 'fill') return undefined;
    // An answer that sets a cookie is one caller's (RFC 9111 §7.3): never handed to the next.
    const seconds =
      status === 200 && headers['set-cookie'] === undefined
        ? storableSeconds(
            p.rule.ttlSeconds,
            {
              cacheControl: headers['cache-control'],
              expires: headers.expires,
              date: headers.date,
            },
            this.#clock.now(),
          )
        : 0;
    const vary = seconds > 0 ? varyFields(headers.vary) : undefined;
    const declared = Number(headers['content-length'] ?? 0);
    if (!vary || declared > this.#settings.maxEntryBytes) {
      p.flight?.settle();
      return undefined;
    }
    const stored = clientResponseHeaders(headers, '');
    for (const name of PER_ANSWER_FIELDS) delete stored[name];
    if (upstreamCacheStatus !== undefined) stored['cache-status'] = upstreamCacheStatus;
    // "stored" is said when the answer is being captured; one that then outgrows the limit is not.
    headers['cache-status'] = withCacheStatus(upstreamCacheStatus, `${p.member}; stored`);
    if (p.flight) p.flight.captured = true;
    return capture(this, p, seconds, vary, stored);
  }

  /** With tracing on: the lookup (and any wait for a coalesced fill) as a span. */
  #traceLookup(exchange: ExchangeView, start: number, result: string): void {
    exchange.trace?.wait('cache.lookup', start, this.#clock.now(), {
      'oauth_sidecar.cache.result': result,
    });
  }

  /** Requests that never read or write the cache: other methods, no-store, a GET with a body. */
  #bypass(exchange: ExchangeView, path: string, directive: string): Plan | undefined {
    const { req, method } = exchange;
    if (method !== 'GET' && method !== 'HEAD') {
      this.#metrics.cacheRequests.inc({ result: 'bypass' });
      const member = `${CACHE_NAME}; fwd=method`;
      return INVALIDATING_METHODS.has(method)
        ? { kind: 'unsafe', member, path }
        : { kind: 'pass', member };
    }
    // A GET with a body or a method override is not the resource's plain representation: such
    // a request neither reads nor writes the cache (a body could poison the entry for everyone).
    const tunnelled =
      !hasNoBody(req) || METHOD_OVERRIDE_FIELDS.some((name) => req.headers[name] !== undefined);
    if (directive !== 'no-store' && !tunnelled) return undefined;
    this.#metrics.cacheRequests.inc({ result: 'bypass' });
    return { kind: 'pass', member: `${CACHE_NAME}; fwd=bypass` };
  }

  #ruleFor(path: string): CacheRule | undefined {
    for (const rule of this.#rules) if (path.startsWith(rule.prefix)) return rule;
    return undefined;
  }

  /**
   * This request leads the fill of `key`. However the exchange ends before a capture starts (an
   * error before any header, the client leaving), waiters wake; a requester that left hands the
   * fill over to one of them. Once capturing, the capture's end settles it, after the store.
   */
  #lead(exchange: ExchangeView, key: string): Flight {
    const lead = this.#startFlight(key);
    exchange.res.once('close', () => {
      if (!lead.captured) lead.settle(!exchange.res.headersSent && exchange.clientGone());
    });
    return lead;
  }

  #startFlight(key: string): Flight {
    const flights = this.#flights;
    let resolve!: () => void;
    // However the fill goes, no waiter waits longer than its answer may take.
    const deadline = setTimeout(() => flight.settle(), this.#maxWaitMs);
    deadline.unref();
    const flight: Flight = {
      waiters: 0,
      settled: false,
      abandoned: false,
      captured: false,
      done: new Promise<void>((r) => (resolve = r)),
      settle(abandoned = false) {
        if (flight.settled) return;
        flight.settled = true;
        flight.abandoned = abandoned;
        clearTimeout(deadline);
        if (flights.get(key) === flight) flights.delete(key);
        resolve();
      },
    };
    flights.set(key, flight);
    return flight;
  }

  #serve(answer: StoredAnswer, exchange: ExchangeView): ForwardOutcome {
    const { res } = exchange;
    if (exchange.clientGone()) return CLIENT_GONE;
    const age = Math.max(0, Math.floor((this.#clock.now() - answer.storedAt) / 1000));
    const headers: OutgoingHttpHeaders = {
      ...answer.headers,
      age: String(age),
      'cache-status': withCacheStatus(answer.headers['cache-status'], `${CACHE_NAME}; hit`),
      'x-request-id': exchange.requestId,
    };
    const keepAlive = keepAliveOf(res);
    if (keepAlive !== undefined) headers['keep-alive'] = keepAlive;
    res.writeHead(200, headers);
    if (exchange.method === 'HEAD') res.end();
    else res.end(answer.body);
    return { status: 200, upstreamStatus: undefined, replayed: false, result: 'complete' };
  }

  /** The plan's Cache-Status also on answers the sidecar makes itself (errors before headers). */
  #plan(exchange: ExchangeView, p: Plan): undefined {
    (exchange.res as Pick<ClientResponse, 'setHeader'>).setHeader('cache-status', p.member);
    this.#plans.set(exchange, p);
    return undefined;
  }
}
