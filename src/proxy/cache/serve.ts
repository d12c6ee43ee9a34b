/**
 * Answers from the cache and their marks (RFC 9211 `Cache-Status`, RFC 9111 `Age`): a fresh hit,
 * or a stale entry that answers instead of an error or while it is refreshed (RFC 5861).
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { CLIENT_GONE, type ForwardOutcome } from '../outcome.js';
import type { ExchangeView } from '../stages.js';
import type { StoredAnswer } from './entries.js';

/** RFC 9211 cache identifier. */
export const CACHE_NAME = 'oauth-sidecar';

/** RFC 9211 §2: each cache appends its member, so the one nearest the client comes last. */
export function withCacheStatus(
  upstream: string | string[] | number | undefined,
  member: string,
): string {
  if (upstream === undefined) return member;
  const previous = Array.isArray(upstream) ? upstream.join(', ') : String(upstream);
  return previous ? `${previous}, ${member}` : member;
}

/** Why a stale entry answered. */
export interface StaleUse {
  detail: 'stale-if-error' | 'stale-while-revalidate';
  /** The API was asked (and failed, or answered `status`): `fwd=stale` (RFC 9211 §2.2). */
  forwarded: boolean;
  status?: number;
}

/** The `Cache-Status` member of an answer from the cache. */
export function hitMember(answer: StoredAnswer, now: number, stale?: StaleUse): string {
  if (stale === undefined) return `${CACHE_NAME}; hit`;
  // RFC 9211 §2.3: `ttl` is the freshness left, negative once stale.
  const ttl = Math.min(-1, Math.floor((answer.expiresAt - now) / 1000));
  let member = `${CACHE_NAME}; hit; ttl=${ttl}`;
  if (stale.forwarded) member += '; fwd=stale';
  if (stale.status !== undefined) member += `; fwd-status=${stale.status}`;
  return `${member}; detail=${stale.detail}`;
}

/** Answer `exchange` from `answer` with `Age` and the `Cache-Status` member given. */
export function serveAnswer(
  answer: StoredAnswer,
  exchange: ExchangeView,
  member: string,
  now: number,
): ForwardOutcome {
  const { res } = exchange;
  if (exchange.clientGone()) return CLIENT_GONE;
  const age = Math.max(0, Math.floor((now - answer.storedAt) / 1000));
  const headers: OutgoingHttpHeaders = {
    ...answer.headers,
    age: String(age),
    'cache-status': withCacheStatus(answer.headers['cache-status'], member),
    'x-request-id': exchange.requestId,
  };
  if (exchange.keepAlive !== undefined) headers['keep-alive'] = exchange.keepAlive;
  res.writeHead(200, headers);
  if (exchange.method === 'HEAD') res.end();
  else res.end(answer.body);
  return { status: 200, upstreamStatus: undefined, replayed: false, result: 'complete' };
}
