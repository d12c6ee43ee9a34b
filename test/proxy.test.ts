import { createHash, randomBytes } from 'node:crypto';
import { connect as connectH2 } from 'node:http2';
import { createServer } from 'node:net';
import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TokenUnavailableError } from '../src/errors.js';
import { createTestPki, startStandin, type Standin, type TestPki } from '../src/standin/index.js';
import {
  counterValue,
  dechunk,
  rawGet,
  rawRequest,
  startStack,
  type Stack,
} from './proxy-stack.js';
import { waitFor } from './helpers/sidecar-process.js';

let pki: TestPki;
let standin: Standin;
let stack: Stack;
const client = new Agent();

beforeAll(async () => {
  pki = await createTestPki();
  standin = await startStandin({ pki });
  stack = await startStack(standin);
});

afterAll(async () => {
  await stack.close();
  await standin.close();
  await client.close();
});

beforeEach(() => {
  stack.tokens.failure = undefined;
});

function get(
  path: string,
  headers: Record<string, string> = {},
  method: 'GET' | 'HEAD' | 'POST' = 'GET',
) {
  return request(`${stack.url}${path}`, { dispatcher: client, headers, method });
}

function lastApiRequest() {
  return standin.apiRequests[standin.apiRequests.length - 1]!;
}

function expectEnvelope(
  answer: { status: number; headers: Record<string, string | string[] | undefined>; body: string },
  status: number,
  code: string,
) {
  expect(answer.status).toBe(status);
  const parsed = JSON.parse(answer.body) as {
    errors: { code: string; detail: string }[];
    requestId: string;
  };
  expect(parsed.errors[0]!.code).toBe(code);
  expect(parsed.requestId).toMatch(/^[A-Za-z0-9._-]{1,128}$/);
  expect(answer.headers['x-request-id']).toBe(parsed.requestId);
  return parsed;
}

describe('forwarding', () => {
  it('replaces the client Authorization with the bearer and rewrites Host', async () => {
    const res = await get('/v1.0/contracts/', {
      authorization: 'Bearer client-supplied',
      'x-other': 'kept',
    });
    expect(res.statusCode).toBe(200);
    const body = (await res.body.json()) as { data: unknown[] };
    expect(body.data.length).toBeGreaterThan(0);
    const seen = lastApiRequest();
    expect(seen.token).toBe(stack.tokens.current);
    expect(seen.token).not.toBe('client-supplied');
    expect(seen.headers.host).toBe(new URL(standin.url).host);
    expect(seen.headers['x-other']).toBe('kept');
    expect(Object.keys(seen.headers).filter((name) => name.startsWith('x-forwarded'))).toEqual([]);
  });

  it('drops hop-by-hop and Connection-listed request headers', async () => {
    const answer = await rawRequest(
      stack.port,
      'GET /v1.0/echo/?q=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: x-foo, close\r\nX-Foo: secret\r\n' +
        'TE: trailers\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: Basic abc\r\nUpgrade: websocket\r\n' +
        'X-Forwarded-For: 10.0.0.1\r\nX-Other: kept\r\n\r\n',
    );
    expect(answer.status).toBe(200);
    const seen = lastApiRequest().headers;
    for (const name of [
      'x-foo',
      'te',
      'keep-alive',
      'proxy-authorization',
      'upgrade',
      'x-forwarded-for',
    ]) {
      expect(seen[name], name).toBeUndefined();
    }
    expect(String(seen.connection ?? '')).not.toMatch(/x-foo/i);
    expect(seen['x-other']).toBe('kept');
    expect(seen.authorization).toBe(`Bearer ${stack.tokens.current}`);
  });

  it('drops hop-by-hop and Connection-listed response headers, keeps the rest and both Set-Cookie', async () => {
    const res = await get('/v1.0/hop');
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-custom-hop']).toBeUndefined();
    // node's own keep-alive header may be present, never the upstream's.
    expect(res.headers['keep-alive']).not.toBe('timeout=5');
    expect(res.headers['x-kept']).toBe('yes');
    expect(res.headers['proxy-authenticate']).toBe('Basic');
    expect(res.headers['set-cookie']).toEqual(['a=1; Path=/; HttpOnly', 'b=2; Path=/; HttpOnly']);
    await res.body.dump();
  });

  it('passes a 5 MB POST body unchanged (sha256) with method and query', async () => {
    const payload = randomBytes(5 * 1024 * 1024);
    const res = await request(`${stack.url}/v1.0/echo/?a=1&b=%2F`, {
      dispatcher: client,
      method: 'POST',
      body: payload,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(res.statusCode).toBe(200);
    const echo = (await res.body.json()) as {
      method: string;
      url: string;
      bodyBytes: number;
      bodySha256: string;
    };
    expect(echo.method).toBe('POST');
    expect(echo.url).toBe('/v1.0/echo/?a=1&b=%2F');
    expect(echo.bodyBytes).toBe(payload.length);
    expect(echo.bodySha256).toBe(createHash('sha256').update(payload).digest('hex'));
  });

  it('passes a chunked POST body unchanged', async () => {
    const payload = randomBytes(200 * 1024);
    function* chunks() {
      for (let at = 0; at < payload.length; at += 7_000) yield payload.subarray(at, at + 7_000);
    }
    const res = await request(`${stack.url}/v1.0/echo/`, {
      dispatcher: client,
      method: 'PUT',
      body: Readable.from(chunks()),
    });
    const echo = (await res.body.json()) as { bodySha256: string };
    expect(echo.bodySha256).toBe(createHash('sha256').update(payload).digest('hex'));
  });

  it('passes CSV answers for Accept: text/csv', async () => {
    const res = await get('/v1.0/contracts/', { accept: 'text/csv' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv/);
    const text = await res.body.text();
    expect(text.split('\r\n')[0]).toContain(',');
  });

  it('passes upstream statuses and bodies unchanged', async () => {
    const res = await get('/v1.0/status/418');
    expect(res.statusCode).toBe(418);
    expect(await res.body.json()).toEqual({ status: 418 });
  });

  it('answers HEAD without a body', async () => {
    const getRes = await get('/v1.0/contracts/');
    const length = getRes.headers['content-length'];
    await getRes.body.dump();
    const res = await get('/v1.0/contracts/', {}, 'HEAD');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe(length);
    expect(await res.body.text()).toBe('');
    expect(lastApiRequest().method).toBe('HEAD');
    // the connection is still usable afterwards
    const again = await get('/v1.0/status/200');
    expect(again.statusCode).toBe(200);
    await again.body.dump();
  });

  it('keeps a valid X-Request-Id, forwards it and returns it; replaces an invalid one', async () => {
    const kept = await get('/v1.0/status/200', { 'x-request-id': 'abc.DEF_1-2' });
    await kept.body.dump();
    expect(kept.headers['x-request-id']).toBe('abc.DEF_1-2');
    expect(lastApiRequest().headers['x-request-id']).toBe('abc.DEF_1-2');

    const replaced = await get('/v1.0/status/200', { 'x-request-id': 'bad id with spaces' });
    await replaced.body.dump();
    const generated = replaced.headers['x-request-id'] as string;
    expect(generated).toMatch(/^[0-9a-f-]{36}$/);
    expect(lastApiRequest().headers['x-request-id']).toBe(generated);

    const tooLong = await get('/v1.0/status/200', { 'x-request-id': 'a'.repeat(129) });
    await tooLong.body.dump();
    expect(tooLong.headers['x-request-id']).not.toBe('a'.repeat(129));
  });

  it('logs one line per request with the path but not the query', async () => {
    const res = await get('/v1.0/status/200?secret=hunter2', { 'x-request-id': 'log-line-1' });
    await res.body.dump();
    // Request lines go out in batches (at most REQUEST_LOG_FLUSH_MS later).
    await waitFor(
      () => stack.logs.some((line) => line.requestId === 'log-line-1'),
      5_000,
      'the request line',
    );
    const lines = stack.logs.filter((line) => line.requestId === 'log-line-1');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      method: 'GET',
      path: '/v1.0/status/200',
      status: 200,
      upstreamStatus: 200,
      replayed: false,
    });
    expect(typeof lines[0]!.durationMs).toBe('number');
    expect(JSON.stringify(stack.logs)).not.toContain('hunter2');
    expect(JSON.stringify(stack.logs)).not.toContain(stack.tokens.current!);
  });
});

describe('refusals', () => {
  it.each(['/v2.0/contracts/', '/oauth/token/', '/', '/metrics'])(
    '404 for %s and nothing forwarded',
    async (path) => {
      const before = standin.apiRequests.length;
      const tokenBefore = standin.tokenRequests.length;
      const res = await get(path);
      expectEnvelope(
        { status: res.statusCode, headers: res.headers, body: await res.body.text() },
        404,
        'not_found',
      );
      expect(standin.apiRequests.length).toBe(before);
      expect(standin.tokenRequests.length).toBe(tokenBefore);
    },
  );

  it.each([
    '/v1.0/../oauth/token/',
    '/v1.0/%2e%2e/oauth/token/',
    '/v1.0/%2E%2e/oauth/token/',
    '/v1.0/.%2e/x',
    '/v1.0/./contracts/',
    '/v1.0/a%2fb',
    '/v1.0/a%2Fb',
    '/v1.0/a%5cb',
    '/v1.0/a\\b',
    '/v1.0\\..\\oauth\\token\\',
    'http://evil.example/v1.0/contracts/',
    'evil.example:443',
    '//evil.example/v1.0/',
    '*',
  ])('400 for %j and nothing forwarded', async (target) => {
    const before = standin.apiRequests.length;
    const answer = await rawGet(stack.port, target);
    expectEnvelope(answer, 400, 'bad_request');
    expect(standin.apiRequests.length).toBe(before);
  });

  it.each(['TRACE'])('405 for %s', async (method) => {
    const before = standin.apiRequests.length;
    const answer = await rawRequest(
      stack.port,
      `${method} /v1.0/contracts/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    expectEnvelope(answer, 405, 'method_not_allowed');
    expect(standin.apiRequests.length).toBe(before);
  });

  it('405 for CONNECT, in the envelope', async () => {
    const answer = await rawRequest(
      stack.port,
      'CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n',
    );
    expectEnvelope(answer, 405, 'method_not_allowed');
  });

  it('503 with Retry-After when no token can be had', async () => {
    stack.tokens.failure = new TokenUnavailableError('token endpoint unavailable', 7);
    const res = await get('/v1.0/contracts/');
    expectEnvelope(
      { status: res.statusCode, headers: res.headers, body: await res.body.text() },
      503,
      'token_unavailable',
    );
    expect(res.headers['retry-after']).toBe('7');
    expect(
      await counterValue(stack.metrics, 'oauth_sidecar_proxy_rejected_total', {
        code: 'token_unavailable',
      }),
    ).toBeGreaterThan(0);
  });

  it('502 when the upstream refuses connections', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const dead = await startStack(standin, { upstream: `https://127.0.0.1:${port}` });
    try {
      const res = await request(`${dead.url}/v1.0/contracts/`, { dispatcher: client });
      const parsed = expectEnvelope(
        { status: res.statusCode, headers: res.headers, body: await res.body.text() },
        502,
        'upstream_unreachable',
      );
      expect(parsed.errors[0]!.detail).not.toContain(String(port));
      expect(
        await counterValue(dead.metrics, 'oauth_sidecar_upstream_requests_total', {
          code: 'error',
        }),
      ).toBe(1);
    } finally {
      await dead.close();
    }
  });

  it('504 when the upstream sends no headers in time', async () => {
    const slow = await startStack(standin, { timeoutMs: 300 });
    try {
      const res = await request(`${slow.url}/v1.0/slow/2000`, { dispatcher: client });
      expectEnvelope(
        { status: res.statusCode, headers: res.headers, body: await res.body.text() },
        504,
        'upstream_timeout',
      );
    } finally {
      await slow.close();
    }
  });
});

describe('401 from the upstream', () => {
  it('renews the token and replays once', async () => {
    await (await get('/v1.0/status/200')).body.dump();
    const oldToken = stack.tokens.current;
    standin.revokeAccessTokens();
    const before = await counterValue(stack.metrics, 'oauth_sidecar_upstream_unauthorized_total', {
      replayed: 'true',
    });
    const res = await get('/v1.0/contracts/', { 'x-request-id': 'replay-1' });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    expect(stack.tokens.current).not.toBe(oldToken);
    const after = await counterValue(stack.metrics, 'oauth_sidecar_upstream_unauthorized_total', {
      replayed: 'true',
    });
    expect(after).toBe(before + 1);
    const seen = standin.apiRequests.filter((r) => r.headers['x-request-id'] === 'replay-1');
    expect(seen.map((r) => r.status)).toEqual([401, 200]);
    await waitFor(
      () => stack.logs.some((line) => line.requestId === 'replay-1'),
      5_000,
      'the request line',
    );
    expect(stack.logs.find((line) => line.requestId === 'replay-1')).toMatchObject({
      replayed: true,
      status: 200,
    });
  });

  it('replays a small POST body byte for byte', async () => {
    await (await get('/v1.0/status/200')).body.dump();
    standin.revokeAccessTokens();
    const payload = randomBytes(10_000);
    const res = await request(`${stack.url}/v1.0/echo/`, {
      dispatcher: client,
      method: 'POST',
      body: payload,
    });
    expect(res.statusCode).toBe(200);
    const echo = (await res.body.json()) as { bodySha256: string };
    expect(echo.bodySha256).toBe(createHash('sha256').update(payload).digest('hex'));
  });

  it('passes the 401 through for a large streamed body', async () => {
    await (await get('/v1.0/status/200')).body.dump();
    standin.revokeAccessTokens();
    const res = await request(`${stack.url}/v1.0/echo/`, {
      dispatcher: client,
      method: 'POST',
      body: randomBytes(200 * 1024),
    });
    expect(res.statusCode).toBe(401);
    await res.body.dump();
    expect(
      await counterValue(stack.metrics, 'oauth_sidecar_upstream_unauthorized_total', {
        replayed: 'false',
      }),
    ).toBeGreaterThan(0);
  });
});

describe('client abort', () => {
  it('aborts the upstream request and logs the cut', async () => {
    const res = await request(`${stack.url}/v1.0/bytes/209715200`, {
      dispatcher: client,
      headers: { 'x-request-id': 'abort-1' },
    });
    for await (const _chunk of res.body) break;
    // The line is written once the forwarder has finished (and left the in-flight gauge).
    await waitFor(
      () => stack.logs.some((line) => line.requestId === 'abort-1'),
      5_000,
      'the request line of the aborted request',
    );
    const gauge = await stack.metrics.requestsInFlight.get();
    expect(gauge.values[0]?.value ?? 0).toBe(0);
    expect(stack.logs.find((line) => line.requestId === 'abort-1')).toMatchObject({
      status: 200,
      result: 'client_closed',
    });
  });
});

describe('drain', () => {
  it('lets the in-flight request finish and answers new ones with 503 shutting_down', async () => {
    const own = await startStack(standin);
    const ownClient = new Agent();
    try {
      const slow = request(`${own.url}/v1.0/slow/800`, { dispatcher: ownClient });
      // A connection that is mid-request when the drain starts is not idle, so it stays open.
      const { connect } = await import('node:net');
      const serverSockets: { bytesRead: number; remotePort?: number }[] = [];
      own.proxy.server.on('connection', (socket: { bytesRead: number; remotePort?: number }) =>
        serverSockets.push(socket),
      );
      const late = connect(own.port, '127.0.0.1');
      await new Promise<void>((resolve) => late.once('connect', () => resolve()));
      late.write('GET /v1.0/contracts/ HTTP/1.1\r\nHost: x\r\n');
      // The server has read the partial request: the connection is active, not idle.
      await waitFor(
        () => serverSockets.some((s) => s.remotePort === late.localPort && s.bytesRead > 0),
        5_000,
        'the server to read the partial request',
      );
      const drained = own.proxy.drain(5_000);
      const lateAnswer = new Promise<string>((resolve) => {
        const chunks: Buffer[] = [];
        late.on('data', (c: Buffer) => chunks.push(c));
        late.on('close', () => resolve(Buffer.concat(chunks).toString()));
      });
      late.write('\r\n');
      const text = await lateAnswer;
      expect(text).toMatch(/^HTTP\/1\.1 503/);
      expect(text).toContain('"shutting_down"');
      const slowRes = await slow;
      expect(slowRes.statusCode).toBe(200);
      expect(await slowRes.body.json()).toEqual({ waitedMs: 800 });
      await drained;
      await expect(
        request(`${own.url}/v1.0/contracts/`, { dispatcher: new Agent() }),
      ).rejects.toThrow();
    } finally {
      await ownClient.close();
      await own.close();
    }
  });
});

describe('drain deadline', () => {
  it('a request the deadline cuts is logged drain_deadline (444: nothing sent), not client_closed', async () => {
    const own = await startStack(standin);
    const ownClient = new Agent();
    try {
      const arrived = new Promise((resolve) => own.proxy.server.once('request', resolve));
      const slow = request(`${own.url}/v1.0/slow/5000`, { dispatcher: ownClient }).catch(
        (error: unknown) => error,
      );
      await arrived;
      await own.proxy.drain(100);
      expect(await slow).toBeInstanceOf(Error);
      await waitFor(
        () => own.logs.some((line) => line.path === '/v1.0/slow/5000'),
        9_000,
        `the request line in ${JSON.stringify(own.logs)}`,
      );
      const line = own.logs.find((entry) => entry.path === '/v1.0/slow/5000')!;
      expect(line).toMatchObject({ status: 444, result: 'drain_deadline' });
    } finally {
      await ownClient.close();
      await own.close();
    }
  });
});

describe('HTTP/2', () => {
  it('serves h2c with prior knowledge', async () => {
    const h2 = await startStack(standin, { http2: true });
    try {
      const session = connectH2(h2.url);
      const answer = await new Promise<{ status: number; body: string; requestId: string }>(
        (resolve, reject) => {
          const stream = session.request({
            ':method': 'GET',
            ':path': '/v1.0/contracts/',
            'x-request-id': 'h2c-1',
          });
          let status = 0;
          let requestId = '';
          const chunks: Buffer[] = [];
          stream.on('response', (headers) => {
            status = Number(headers[':status']);
            requestId = String(headers['x-request-id']);
          });
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('end', () =>
            resolve({ status, body: Buffer.concat(chunks).toString(), requestId }),
          );
          stream.on('error', reject);
          stream.end();
        },
      );
      expect(answer.status).toBe(200);
      expect(answer.requestId).toBe('h2c-1');
      expect((JSON.parse(answer.body) as { data: unknown[] }).data.length).toBeGreaterThan(0);
      const refused = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const stream = session.request({ ':method': 'GET', ':path': '/v1.0/%2e%2e/x' });
        let status = 0;
        const chunks: Buffer[] = [];
        stream.on('response', (headers) => (status = Number(headers[':status'])));
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString() }));
        stream.on('error', reject);
        stream.end();
      });
      expect(refused.status).toBe(400);
      expect(refused.body).toContain('"bad_request"');
      session.close();
    } finally {
      await h2.close();
    }
  });

  it('speaks HTTP/2 to the upstream when asked', async () => {
    const h2Standin = await startStandin({ pki, http2: true });
    const h2 = await startStack(h2Standin, { upstreamHttp2: true });
    try {
      const res = await request(`${h2.url}/v1.0/contracts/`, { dispatcher: client });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
      const seen = h2Standin.apiRequests[h2Standin.apiRequests.length - 1]!;
      expect(seen.httpVersion).toBe('2.0');
      expect(seen.token).toBe(h2.tokens.current);
    } finally {
      await h2.close();
      await h2Standin.close();
    }
  });
});

describe('helpers', () => {
  it('dechunk', () => {
    expect(dechunk('3\r\nabc\r\n0\r\n\r\n')).toBe('abc');
  });
});
