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
  // Recorded as the headers go out, so a test that has its answer always finds the entry.
  const record = (status: number): void => {
    entry.status = status;
    state.apiRequests.push(entry);
  };
  const json = (status: number, payload: unknown, headers?: OutgoingHttpHeaders): void => {
    record(status);
    sendJson(res, status, payload, headers);
  };

  if (!API_PREFIXES.some((prefix) => path.startsWith(prefix))) {
    json(404, envelope('not_found', `no route for ${path}`));
    return;
  }
  if (token === undefined || !state.tokens.accessTokenValid(token)) {
    const detail =
      token === undefined
        ? 'a bearer token is required'
        : 'the access token is unknown, expired or revoked';
    json(401, envelope('unauthorized', detail), {
      'www-authenticate': 'Bearer error="invalid_token"',
    });
    return;
  }

  const segments = path.split('/'); // ['', 'v1.0', name, arg, ...]
  const route = path.startsWith('/beta/') ? 'beta' : (segments[2] ?? '');
  const arg = segments[3];

  switch (route) {
    case 'contracts':
      if (segments.length > 4 || (arg !== undefined && arg !== '')) break;
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        json(405, envelope('method_not_allowed', 'use GET'), { allow: 'GET, HEAD' });
        return;
      }
      if ((req.headers.accept ?? '').toLowerCase().includes('text/csv')) {
        const csv = contractsCsv();
        record(200);
        out(res).writeHead(200, {
          'content-type': 'text/csv; charset=utf-8',
          'content-length': Buffer.byteLength(csv),
        });
        out(res).end(csv);
        return;
      }
      json(200, { data: SAMPLE_CONTRACTS });
      return;
    case 'echo':
    case 'beta':
      json(200, {
        method: entry.method,
        url,
        headers: entry.headers,
        bodyBytes: body.bytes,
        bodySha256: body.sha256,
        httpVersion: req.httpVersion,
      });
      return;
    case 'bytes': {
      const n = nonNegativeInt(arg);
      if (n === undefined || segments.length > 4) break;
      record(200);
      out(res).writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': n,
      });
      streamBytes(res, n, PATTERN);
      return;
    }
    case 'slow': {
      const ms = nonNegativeInt(arg);
      if (ms === undefined) break;
      state.timers.after(ms, res, () => json(200, { waitedMs: ms }));
      return;
    }
    case 'slow-body': {
      const ms = nonNegativeInt(arg);
      if (ms === undefined) break;
      record(200);
      out(res).writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      out(res).write('{"first":"chunk",');
      state.timers.after(ms, res, () => out(res).end(`"waitedMs":${ms}}`));
      return;
    }
    case 'hop':
      record(200);
      hop(req, res);
      return;
    case 'status': {
      const code = nonNegativeInt(arg);
      if (code === undefined || code < 200 || code > 599) {
        json(400, envelope('invalid_request', 'status must be 200..599'));
        return;
      }
      if (code === 204 || code === 304) {
        record(code);
        out(res).writeHead(code);
        out(res).end();
        return;
      }
      // `?retry-after=` adds that header (seconds or an HTTP date), as the API's 429/503 may.
      const retryAfter = new URLSearchParams(url.split('?')[1] ?? '').get('retry-after');
      json(code, { status: code }, retryAfter === null ? {} : { 'retry-after': retryAfter });
      return;
    }
    case 'reset':
      record(0);
      resetRequest(req);
      return;
    default:
      break;
  }
  json(404, envelope('not_found', `no route for ${path}`));
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
