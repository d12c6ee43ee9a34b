/**
 * The opt-in response cache (DESIGN.md "Response cache"), as a Forwarder around the forwarder:
 * it sits before the token is added, so a hit costs no token, no rate-limit slot and no upstream
 * request. Paths outside every rule go straight to the inner forwarder.
 *
 * Safe only because one identity (the organisation's client) serves every caller: an answer the
 * API gave the sidecar is the answer it would give any caller of the sidecar.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Clock } from '../../clock.js';
import type { CacheRule, Config } from '../../config/types.js';
import type { SidecarMetrics } from '../../telemetry/metrics.js';
import type {
  ClientRequest,
  ClientResponse,
  ForwardContext,
  ForwardOutcome,
  Forwarder,
} from '../forwarder.js';
import type { AnswerTap, BodySink } from '../types.js';
import { requestDirective, storableSeconds, varyFields } from './directives.js';
import {
  answerSize,
  createResponseStore,
  varyValuesOf,
  type ResponseStore,
  type StoredAnswer,
} from './store.js';

export type { CacheRule };
export type CacheSettings = Config['cache'];

export type CacheMetrics = Pick<SidecarMetrics, 'cacheRequests' | 'cacheBytes'>;

/** Requests waiting for one upstream answer at most; further ones go upstream on their own. */
export const DEFAULT_MAX_WAITERS = 256;

export interface CachingForwarderOptions {
  inner: Forwarder;
  settings: CacheSettings;
  clock: Pick<Clock, 'now'>;
  metrics: CacheMetrics;
  maxWaiters?: number;
}

export interface ResponseCache extends Forwarder {
  /** For /status. */
  stats(): {
    entries: number;
    bytes: number;
    maxBytes: number;
    rules: number;
    /** Requests waiting for an identical one on its way upstream. */
    waiting: number;
  };
}

/** RFC 9211 cache identifier. */
const CACHE_NAME = 'oauth-sidecar';
const INVALIDATING_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Fields the sidecar sets per answer; never stored. */
const PER_ANSWER_FIELDS = ['x-request-id', 'age', 'cache-status'];

/** RFC 9211 §2: each cache appends its member, so the one nearest the client comes last. */
function withCacheStatus(upstream: OutgoingHttpHeaders[string], member: string): string {
  if (upstream === undefined) return member;
  const previous = Array.isArray(upstream) ? upstream.join(', ') : String(upstream);
  return previous ? `${previous}, ${member}` : member;
}

function headerText(value: string | string[] | undefined): string {
  if (value === undefined) return '';
  return Array.isArray(value) ? value.join(', ') : value;
}

function gone(): ForwardOutcome {
  return { status: 499, upstreamStatus: undefined, replayed: false, result: 'client_closed' };
}

/** An upstream GET in progress that identical requests wait for. */
interface Flight {
  waiters: number;
  settled: boolean;
  settle(): void;
  done: Promise<void>;
}

function newFlight(): Flight {
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  const flight: Flight = {
    waiters: 0,
    settled: false,
    done,
    settle() {
      if (flight.settled) return;
      flight.settled = true;
      resolve();
    },
  };
  return flight;
}

/** Wait for `flight`, unless the client leaves first: then the waiter is dropped at once. */
function waitFor(flight: Flight, res: ClientResponse): Promise<'done' | 'gone'> {
  if (res.destroyed) return Promise.resolve('gone');
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

/** Only `Cache-Status` is added: the answer passes, nothing is stored. */
function statusOnly(member: string): AnswerTap {
  return {
    head(_status, headers) {
      headers['cache-status'] = withCacheStatus(headers['cache-status'], member);
      return undefined;
    },
  };
}

export function createCachingForwarder(options: CachingForwarderOptions): ResponseCache {
  const { inner, settings, clock, metrics } = options;
  const maxWaiters = options.maxWaiters ?? DEFAULT_MAX_WAITERS;
  // Longest prefix first: the most specific rule wins.
  const rules = [...settings.rules].sort((a, b) => b.prefix.length - a.prefix.length);
  const store: ResponseStore = createResponseStore({ maxBytes: settings.maxBytes }, (bytes) =>
    metrics.cacheBytes.set(bytes),
  );
  const flights = new Map<string, Flight>();
  // Bumped by every invalidation: an answer whose request began before it is not stored.
  let generation = 0;

  function ruleFor(path: string): CacheRule | undefined {
    for (const rule of rules) if (path.startsWith(rule.prefix)) return rule;
    return undefined;
  }

  function serve(
    answer: StoredAnswer,
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
  ): ForwardOutcome {
    if (res.destroyed) return gone();
    const age = Math.max(0, Math.floor((clock.now() - answer.storedAt) / 1000));
    res.writeHead(200, {
      ...answer.headers,
      age: String(age),
      'cache-status': withCacheStatus(answer.headers['cache-status'], `${CACHE_NAME}; hit`),
      'x-request-id': ctx.requestId,
    });
    if (req.method === 'HEAD') res.end();
    else res.end(answer.body);
    return { status: 200, upstreamStatus: undefined, replayed: false, result: 'complete' };
  }

  /** A tap that adds Cache-Status and captures a storable answer while it streams. */
  function capturing(
    key: string,
    path: string,
    rule: CacheRule,
    req: ClientRequest,
    fwd: string,
    flight: Flight | undefined,
  ): AnswerTap {
    const startedIn = generation;
    const member = `${CACHE_NAME}; fwd=${fwd}`;
    return {
      head(status, headers): BodySink | undefined {
        const upstreamStatus = headers['cache-status'];
        const seconds =
          status === 200 ? storableSeconds(rule.ttlSeconds, headers['cache-control']) : 0;
        const vary = seconds > 0 ? varyFields(headers.vary) : undefined;
        const declared = Number(headers['content-length'] ?? 0);
        if (!vary || declared > settings.maxEntryBytes) {
          headers['cache-status'] = withCacheStatus(upstreamStatus, member);
          flight?.settle();
          return undefined;
        }
        const stored: OutgoingHttpHeaders = { ...headers };
        for (const name of PER_ANSWER_FIELDS) delete stored[name];
        if (upstreamStatus !== undefined) stored['cache-status'] = upstreamStatus;
        // "stored" is said when the answer is being captured; one that turns out too large is not.
        headers['cache-status'] = withCacheStatus(upstreamStatus, `${member}; stored`);
        const varyValues = varyValuesOf(vary, req.headers);

        let chunks: Buffer[] = [];
        let size = 0;
        let active = true;
        const stop = () => {
          if (!active) return;
          active = false;
          store.release(size);
          chunks = [];
          flight?.settle();
        };
        return {
          chunk(data) {
            if (!active) return;
            if (size + data.length > settings.maxEntryBytes || !store.reserve(data.length)) {
              stop();
              return;
            }
            chunks.push(data);
            size += data.length;
          },
          end() {
            if (!active) return;
            const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
            stop();
            if (generation !== startedIn) return;
            const now = clock.now();
            const answerHeaders = { ...stored, 'content-length': String(body.length) };
            store.put(key, path, {
              headers: answerHeaders,
              body,
              storedAt: now,
              expiresAt: now + seconds * 1000,
              vary,
              varyValues,
              size: answerSize(key, answerHeaders, body.length, vary),
            });
          },
          abort: stop,
        };
      },
    };
  }

  async function forwardUnder(
    rule: CacheRule,
    path: string,
    req: ClientRequest,
    res: ClientResponse,
    ctx: ForwardContext,
    waited: boolean,
  ): Promise<ForwardOutcome> {
    const method = req.method ?? 'GET';
    if (method !== 'GET' && method !== 'HEAD') {
      metrics.cacheRequests.inc({ result: 'bypass' });
      res.setHeader('cache-status', `${CACHE_NAME}; fwd=method`);
      const outcome = await inner.forward(req, res, {
        ...ctx,
        tap: statusOnly(`${CACHE_NAME}; fwd=method`),
      });
      if (INVALIDATING_METHODS.has(method) && outcome.status >= 200 && outcome.status < 300) {
        // RFC 9111 §4.4: a successful unsafe request makes what is stored for its path stale.
        generation += 1;
        store.invalidatePath(path);
      }
      return outcome;
    }

    const directive = requestDirective(req.headers['cache-control'], req.headers.pragma);
    if (directive === 'no-store') {
      metrics.cacheRequests.inc({ result: 'bypass' });
      res.setHeader('cache-status', `${CACHE_NAME}; fwd=bypass`);
      return inner.forward(req, res, { ...ctx, tap: statusOnly(`${CACHE_NAME}; fwd=bypass`) });
    }

    const key = `${req.url ?? '/'}\n${headerText(req.headers.accept)}\n${headerText(req.headers['accept-encoding'])}`;
    let fwd = 'request';
    if (directive === 'none') {
      const found = store.lookup(key, path, req.headers, clock.now());
      if (found.kind === 'hit') {
        metrics.cacheRequests.inc({ result: waited ? 'coalesced' : 'hit' });
        return serve(found.answer, req, res, ctx);
      }
      fwd = found.kind;
      const flight = method === 'GET' && !waited ? flights.get(key) : undefined;
      if (flight && flight.waiters < maxWaiters) {
        if ((await waitFor(flight, res)) === 'gone') return gone();
        // Served from the leader's stored answer, or on its own if the leader stored nothing.
        return forwardUnder(rule, path, req, res, ctx, true);
      }
    }

    metrics.cacheRequests.inc({ result: 'miss' });
    res.setHeader('cache-status', `${CACHE_NAME}; fwd=${fwd}`);
    if (method === 'HEAD') {
      return inner.forward(req, res, { ...ctx, tap: statusOnly(`${CACHE_NAME}; fwd=${fwd}`) });
    }
    const lead = !waited && !flights.has(key) ? newFlight() : undefined;
    if (lead) flights.set(key, lead);
    try {
      return await inner.forward(req, res, {
        ...ctx,
        tap: capturing(key, path, rule, req, fwd, lead),
      });
    } finally {
      if (lead) {
        lead.settle();
        flights.delete(key);
      }
    }
  }

  return {
    forward(req, res, ctx) {
      const url = req.url ?? '/';
      const query = url.indexOf('?');
      const path = query === -1 ? url : url.slice(0, query);
      const rule = ruleFor(path);
      if (!rule) return inner.forward(req, res, ctx);
      return forwardUnder(rule, path, req, res, ctx, false);
    },
    stats() {
      let waiting = 0;
      for (const flight of flights.values()) waiting += flight.waiters;
      return { ...store.stats(), rules: rules.length, waiting };
    },
  };
}
