/**
 * Header hygiene in both directions (docs/design.md "Proxy"). Pure functions on plain data,
 * so each rule is tested without a socket.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { connectionListed, HOP_BY_HOP } from '../http-fields/hop-by-hop.js';

/**
 * Dropped from requests on top of the hop-by-hop set, each for its own reason:
 * - authorization / proxy-authorization: the sidecar sets the only credential (docs/design.md "Proxy").
 * - host: RFC 9110 §7.2, a proxy sends the upstream's authority.
 * - expect: the sidecar's node server already answered `100-continue` (RFC 9110 §10.1.1), and
 *   undici refuses to send it.
 * - forwarded / x-forwarded-* / via / x-real-ip: no topology of the pod leaks to the third party
 *   (docs/security.md).
 * - x-request-id: replaced by the validated or generated id.
 */
const REQUEST_ONLY_DROPS = new Set([
  'authorization',
  'proxy-authorization',
  'host',
  'expect',
  'forwarded',
  'via',
  'x-real-ip',
  'x-request-id',
]);

export interface UpstreamRequestHeaderOptions {
  /** The upstream's authority (`host[:port]`), sent as `Host`. */
  host: string;
  accessToken: string;
  requestId: string;
  /** With tracing on: the attempt's own context, replacing the caller's `traceparent`. */
  traceparent?: string | undefined;
}

/**
 * Headers to send upstream, from node's `rawHeaders` (every field line in order, so repeated
 * fields survive unmerged). Returns undici's flat `[name, value, name, value, ...]` form. The
 * bearer goes first: however many fields a client sends, an upstream that truncates or refuses
 * long header sections sees the sidecar's credential (a client must not make it invalidate it).
 */
export function upstreamRequestHeaders(
  rawHeaders: readonly string[],
  options: UpstreamRequestHeaderOptions,
): string[] {
  let listed: Set<string> | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length === 10 && name.toLowerCase() === 'connection') {
      listed ??= new Set();
      for (const listedName of connectionListed([rawHeaders[i + 1] ?? ''])) listed.add(listedName);
    }
  }

  const out: string[] = [
    'authorization',
    `Bearer ${options.accessToken}`,
    'host',
    options.host,
    'x-request-id',
    options.requestId,
  ];
  const traceparent = options.traceparent;
  if (traceparent !== undefined) out.push('traceparent', traceparent);
  const cookies: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const rawName = rawHeaders[i] ?? '';
    const value = rawHeaders[i + 1] ?? '';
    const name = rawName.toLowerCase();
    // HTTP/2 pseudo-headers (`:path`, `:authority`, ...) are not fields (RFC 9113 §8.3).
    if (name.startsWith(':')) continue;
    if (HOP_BY_HOP.has(name) || REQUEST_ONLY_DROPS.has(name) || listed?.has(name) === true)
      continue;
    if (name.startsWith('x-forwarded-')) continue;
    if (traceparent !== undefined && name === 'traceparent') continue;
    // RFC 9113 §8.2.3: HTTP/2 may split Cookie into crumbs; rejoin them with "; " for HTTP/1.1.
    if (name === 'cookie') {
      cookies.push(value);
      continue;
    }
    out.push(rawName, value);
  }
  if (cookies.length > 0) out.push('cookie', cookies.join('; '));
  return out;
}

function asList(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

/**
 * Headers to send the client, from the upstream's answer as undici parsed it (lower-case names;
 * repeated fields such as `Set-Cookie` as arrays, which node writes as separate lines).
 */
export function clientResponseHeaders(
  upstream: IncomingHttpHeaders | Record<string, string | string[] | undefined>,
  requestId: string,
  /** The upstream status, when it is 204: RFC 9110 §8.6, a 204 carries no Content-Length. */
  status = 200,
): OutgoingHttpHeaders {
  const { connection } = upstream;
  // `keep-alive` / `close` (nearly every answer) list no field beyond the hop-by-hop set.
  const listed =
    connection === undefined || connection === 'keep-alive' || connection === 'close'
      ? undefined
      : connectionListed(asList(connection));
  const out: OutgoingHttpHeaders = {};
  for (const rawName in upstream) {
    const value = upstream[rawName];
    if (value === undefined) continue;
    const name = rawName.toLowerCase();
    if (dropsFromAnswer(name, listed, status)) continue;
    out[name] = value;
  }
  out['x-request-id'] = requestId;
  return out;
}

/**
 * The one rule of both answer-header builders: a field of the upstream's answer the client does
 * not get (`name` lower-case; `listed`: the names the answer's `Connection` lists).
 */
function dropsFromAnswer(name: string, listed: Set<string> | undefined, status: number): boolean {
  return (
    HOP_BY_HOP.has(name) ||
    listed?.has(name) === true ||
    // RFC 9110 §8.6: a 204 carries no Content-Length.
    (status === 204 && name === 'content-length') ||
    // Set by the builder: the client correlates by the id it sent or was given, whatever the
    // upstream echoes.
    name === 'x-request-id'
  );
}
