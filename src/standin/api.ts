/**
 * The API side: bearer-protected routes under /v1.0/ and /beta/; every other path is a 404, and
 * every request is recorded, so a test can tell that a proxy forwarded something it should not have. Besides the API's contracts
 * listing, diagnostic routes let tests exercise the proxy: echo, large and slow bodies, hop-by-hop
 * headers, arbitrary statuses and resets.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import {
  envelope,
  hashBody,
  isHttp2,
  out,
  resetRequest,
  sendJson,
  streamBytes,
  type Req,
  type Res,
} from './http.js';
import type { StandinState } from './state.js';
import type { RecordedApiRequest } from './types.js';

export const API_PREFIXES = ['/v1.0/', '/beta/'] as const;

const CHUNK = 64 * 1024;
/** Byte k of every /v1.0/bytes/<n> body is `k & 0xff`, so a client can check what it got. */
const PATTERN = Buffer.from(Array.from({ length: CHUNK }, (_, i) => i & 0xff));

/** Plausible records: docs/api-notes.md §2.3 shows the path, not the record's fields. */
export const SAMPLE_CONTRACTS = [
  { shortName: 'spark30s', fullName: 'Spark30S Atlantic', type: 'freight' },
  { shortName: 'spark25s', fullName: 'Spark25S Pacific', type: 'freight' },
  { shortName: 'spark30ffa', fullName: 'Spark30FFA Atlantic Forward Freight', type: 'freight-ffa' },
  { shortName: 'sparknwe', fullName: 'SparkNWE DES LNG', type: 'lng' },
  { shortName: 'sparkswe', fullName: 'SparkSWE DES LNG', type: 'lng' },
] as const;

function contractsCsv(): string {
  const lines = ['shortName,fullName,type'];
  for (const c of SAMPLE_CONTRACTS) lines.push(`${c.shortName},${c.fullName},${c.type}`);
  return lines.join('\r\n') + '\r\n';
}

function bearerOf(req: Req): string | undefined {
  const match = /^bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  return match?.[1];
}

function nonNegativeInt(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{1,15}$/.test(text)) return undefined;
  return Number(text);
}

/** One API request as the routes see it. */
interface Call {
  req: Req;
  res: Res;
  url: string;
  segments: string[];
  arg: string | undefined;
  entry: RecordedApiRequest;
  state: StandinState;
  /** Record the request with `status` (as the headers go out). */
  record(status: number): void;
  json(status: number, payload: unknown, headers?: OutgoingHttpHeaders): void;
}

/** Each route answers and returns true, or returns false for a 404. */
const ROUTES: Record<string, (call: Call) => boolean> = {
  contracts: contracts,
  echo: echo,
  beta: echo,
  bytes(call) {
    const n = nonNegativeInt(call.arg);
    if (n === undefined || call.segments.length > 4) return false;
    call.record(200);
    out(call.res).writeHead(200, {
      'content-type': 'application/octet-stream',
      'content-length': n,
    });
    streamBytes(call.res, n, PATTERN);
    return true;
  },
  slow(call) {
    const ms = nonNegativeInt(call.arg);
    if (ms === undefined) return false;
    call.state.timers.after(ms, call.res, () => call.json(200, { waitedMs: ms }));
    return true;
  },
  'slow-body'(call) {
    const ms = nonNegativeInt(call.arg);
    if (ms === undefined) return false;
    const res = out(call.res);
    call.record(200);
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    res.write('{"first":"chunk",');
    call.state.timers.after(ms, call.res, () => res.end(`"waitedMs":${ms}}`));
    return true;
  },
  hop(call) {
    call.record(200);
    hop(call.req, call.res);
    return true;
  },
  status: status,
  reset(call) {
    call.record(0);
    resetRequest(call.req);
    return true;
  },
};

function contracts(call: Call): boolean {
  const { req, res, arg } = call;
  if (call.segments.length > 4 || (arg !== undefined && arg !== '')) return false;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    call.json(405, envelope('method_not_allowed', 'use GET'), { allow: 'GET, HEAD' });
    return true;
  }
  if (!(req.headers.accept ?? '').toLowerCase().includes('text/csv')) {
    call.json(200, { data: SAMPLE_CONTRACTS });
    return true;
  }
  const csv = contractsCsv();
  call.record(200);
  out(res).writeHead(200, {
    'content-type': 'text/csv; charset=utf-8',
    'content-length': Buffer.byteLength(csv),
  });
  out(res).end(csv);
  return true;
}

function echo(call: Call): boolean {
  const { entry } = call;
  call.json(200, {
    method: entry.method,
    url: call.url,
    headers: entry.headers,
    bodyBytes: entry.bodyBytes,
    bodySha256: entry.bodySha256,
    httpVersion: call.req.httpVersion,
  });
  return true;
}

function status(call: Call): boolean {
  const code = nonNegativeInt(call.arg);
  if (code === undefined || code < 200 || code > 599) {
    call.json(400, envelope('invalid_request', 'status must be 200..599'));
    return true;
  }
  if (code === 204 || code === 304) {
    call.record(code);
    out(call.res).writeHead(code);
    out(call.res).end();
    return true;
  }
  // `?retry-after=` adds that header (seconds or an HTTP date), as the API's 429/503 may.
  const retryAfter = new URLSearchParams(call.url.split('?')[1] ?? '').get('retry-after');
  call.json(code, { status: code }, retryAfter === null ? {} : { 'retry-after': retryAfter });
  return true;
}

function faultOf(state: StandinState, path: string) {
  for (const [prefix, fault] of state.apiFaults) if (path.startsWith(prefix)) return fault;
  return undefined;
}

export async function handleApiRequest(req: Req, res: Res, state: StandinState): Promise<void> {
  const url = req.url ?? '/';
  const path = url.split('?')[0]!;
  const token = bearerOf(req);
  // Read (and hash) the whole body first: echo needs it, and it keeps keep-alive connections usable.
  const body = await hashBody(req);
  if (body === undefined) return;
  const entry: RecordedApiRequest = {
    at: state.clock.now(),
    method: req.method ?? '',
    url,
    headers: { ...req.headers },
    token,
    bodyBytes: body.bytes,
    bodySha256: body.sha256,
    status: 0,
    httpVersion: req.httpVersion,
  };
  const segments = path.split('/'); // ['', 'v1.0', name, arg, ...]
  const call: Call = {
    req,
    res,
    url,
    segments,
    arg: segments[3],
    entry,
    state,
    // Recorded as the headers go out, so a test that has its answer always finds the entry.
    record(status) {
      entry.status = status;
      state.apiRequests.push(entry);
    },
    json(status, payload, headers) {
      call.record(status);
      sendJson(res, status, payload, headers);
    },
  };
  if (!API_PREFIXES.some((prefix) => path.startsWith(prefix))) {
    call.json(404, envelope('not_found', `no route for ${path}`));
  } else if (token === undefined || !state.tokens.accessTokenValid(token)) {
    const detail =
      token === undefined
        ? 'a bearer token is required'
        : 'the access token is unknown, expired or revoked';
    call.json(401, envelope('unauthorized', detail), {
      'www-authenticate': 'Bearer error="invalid_token"',
    });
  } else if (faultOf(state, path) !== undefined) {
    const fault = faultOf(state, path)!;
    const headers = fault.retryAfter === undefined ? {} : { 'retry-after': fault.retryAfter };
    call.json(fault.status, envelope('maintenance', 'Maintenance Mode'), headers);
  } else {
    const name = path.startsWith('/beta/') ? 'beta' : (segments[2] ?? '');
    const route = Object.hasOwn(ROUTES, name) ? ROUTES[name] : undefined;
    if (route === undefined || !route(call)) {
      call.json(404, envelope('not_found', `no route for ${path}`));
    }
  }
}

/**
 * Hop-by-hop headers a proxy must strip (RFC 9110 §7.6.1) next to end-to-end ones it must keep.
 * HTTP/2 forbids connection-specific fields (RFC 9113 §8.2.2), so those two are HTTP/1.1 only.
 */
function hop(req: Req, res: Res): void {
  const o = out(res);
  const body = JSON.stringify({ hop: true });
  if (!isHttp2(req)) {
    o.setHeader('connection', 'X-Custom-Hop');
    o.setHeader('keep-alive', 'timeout=5');
  }
  o.setHeader('x-custom-hop', '1');
  o.setHeader('proxy-authenticate', 'Basic');
  o.setHeader('x-kept', 'yes');
  o.setHeader('set-cookie', ['a=1; Path=/; HttpOnly', 'b=2; Path=/; HttpOnly']);
  o.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  o.end(body);
}
