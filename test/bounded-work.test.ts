/**
 * docs/design.md "Bounded work" against real servers: each limit driven to its edge, and each abuse
 * case (a header flood, slow and vanishing clients) end to end.
 */
import { connect as connectH2, constants as h2 } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, startStandin, type Standin, type TestPki } from '../src/standin/index.js';
import { waitFor } from './helpers/sidecar-process.js';
import { startCountingUpstream, startRawUpstream } from './helpers/upstream.js';
import { counterValue, startStack, type Stack } from './proxy-stack.js';

let pki: TestPki;
let standin: Standin;
const client = new Agent();

beforeAll(async () => {
  pki = await createTestPki();
  standin = await startStandin({ pki });
});

afterAll(async () => {
  await client.close();
  await standin.close();
});

/** A raw HTTP/1.1 connection: write bytes, count the answers' status lines as they arrive. */
function rawConnection(port: number, options: { allowHalfOpen?: boolean } = {}) {
  const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: options.allowHalfOpen });
  let text = '';
  let ended = false;
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('end', () => (ended = true));
  socket.on('error', () => undefined);
  return {
    socket,
    text: () => text,
    ended: () => ended,
    statuses: () => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])),
  };
}

function envelopeCode(body: string): string | undefined {
  return (JSON.parse(body) as { errors: { code: string }[] }).errors[0]?.code;
}

const GET = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`;

describe('proxy.maxPipelined and upstream.maxConnections', () => {
  let stack: Stack;
  let upstream: Awaited<ReturnType<typeof startCountingUpstream>>;

  beforeAll(async () => {
    upstream = await startCountingUpstream(pki, (_req, res, done) => {
      setTimeout(() => {
        res.end('{"ok":true}');
        done();
      }, 2);
    });
    stack = await startStack(standin, {
      upstream: upstream.url,
      limits: { maxPipelined: 8, maxConnections: 4 },
    });
  });
  afterAll(async () => {
    await stack.close();
    await upstream.close();
  });

  it('a flood of pipelined GETs on one socket uses at most maxConnections upstream, at most maxPipelined at once, and other clients are served', async () => {
    const flood = rawConnection(stack.port);
    // The connection's requests go upstream one after another, so the flood lasts its count of
    // upstream answers: 300 are 37 times maxPipelined and 75 times maxConnections, and still
    // last long enough (250 answers after the 50th) for another client to be served in between.
    const count = 300;
    flood.socket.write(GET('/v1.0/flood').repeat(count));

    // Another client is served while the flood is in progress.
    await waitFor(() => upstream.requests > 50, 10_000, 'the flood under way');
    const other = await request(`${stack.url}/v1.0/other`, { dispatcher: client });
    await other.body.text();
    expect(other.statusCode).toBe(200);
    // Answered while the flood still waits for its answers, not after them.
    expect(flood.statuses().length).toBeLessThan(count);

    await waitFor(() => flood.statuses().length === count, 60_000, 'every pipelined answer');
    expect(new Set(flood.statuses())).toEqual(new Set([200]));
    expect(upstream.connections).toBeLessThanOrEqual(4);
    // The flood's own share: 8 at once, plus the one other request.
    expect(upstream.maxInProgress).toBeLessThanOrEqual(8 + 1);
    flood.socket.destroy();
  }, 90_000);
});

describe('requests pipelined behind one whose client leaves', () => {
  it('are never sent upstream, and each is logged as the client leaving', async () => {
    let held: (() => void) | undefined;
    const upstream = await startCountingUpstream(pki, (_req, res, done) => {
      held = () => {
        res.end('{"ok":true}');
        done();
      };
    });
    const stack = await startStack(standin, { upstream: upstream.url, logLevel: 'info' });
    const requestLines = () => stack.logs.filter((l) => l.msg === 'request');
    try {
      const raw = rawConnection(stack.port);
      raw.socket.write(GET('/v1.0/first') + GET('/v1.0/second') + GET('/v1.0/third'));
      await waitFor(() => upstream.requests === 1, 5_000, 'the first request upstream');
      // The client leaves while its first answer is still upstream.
      raw.socket.destroy();
      await waitFor(() => requestLines().length === 3, 5_000, 'all three requests logged');
      held?.();
      expect(requestLines().map((l) => [l.path, l.status])).toEqual(
        expect.arrayContaining([
          ['/v1.0/first', 499],
          ['/v1.0/second', 499],
          ['/v1.0/third', 499],
        ]),
      );
      expect(upstream.requests).toBe(1);
      await waitFor(async () => (await inFlightOf(stack)) === 0, 5_000, 'every slot back');
    } finally {
      await stack.close();
      await upstream.close();
    }
  });
});

describe('proxy.maxInFlight', () => {
  it('answers 503 overloaded with Retry-After: 1 once maxInFlight requests are in progress', async () => {
    const stack = await startStack(standin, { limits: { maxInFlight: 2 } });
    const release = stack.tokens.hold();
    try {
      const first = request(`${stack.url}/v1.0/contracts/`, { dispatcher: client });
      const second = request(`${stack.url}/v1.0/contracts/`, { dispatcher: client });
      await waitFor(() => stack.tokens.waiting === 2, 5_000, 'two requests in progress');
      const third = await request(`${stack.url}/v1.0/contracts/`, { dispatcher: client });
      const body = await third.body.text();
      expect(third.statusCode).toBe(503);
      expect(third.headers['retry-after']).toBe('1');
      expect(envelopeCode(body)).toBe('overloaded');
      release();
      for (const answer of await Promise.all([first, second])) {
        await answer.body.text();
        expect(answer.statusCode).toBe(200);
      }
      expect(
        await counterValue(stack.metrics, 'oauth_sidecar_proxy_rejected_total', {
          code: 'overloaded',
        }),
      ).toBe(1);
    } finally {
      release();
      await stack.close();
    }
  });
});

describe('proxy.maxHeaders and header rules', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(standin, { limits: { maxHeaders: 100 } });
  });
  afterAll(() => stack.close());

  /** Short repeated fields: 2,000 of them stay under node's 16 KiB header size limit. */
  function fields(n: number): string {
    return 'a: 1\r\n'.repeat(n);
  }

  it('101 header fields: 431 request_headers_too_large, nothing forwarded, no token invalidated, connection kept', async () => {
    const before = standin.apiRequests.length;
    const conn = rawConnection(stack.port);
    // 101 fields in all: Host plus 100.
    conn.socket.write(GET('/v1.0/contracts/', fields(100)));
    await waitFor(() => conn.statuses().length === 1, 5_000, 'the 431');
    expect(conn.statuses()).toEqual([431]);
    expect(conn.text()).toContain('"request_headers_too_large"');
    // The connection stays usable: the next request on it is served.
    conn.socket.write(GET('/v1.0/contracts/'));
    await waitFor(() => conn.statuses().length === 2, 5_000, 'the next answer');
    expect(conn.statuses()).toEqual([431, 200]);
    conn.socket.destroy();
    expect(standin.apiRequests.length).toBe(before + 1);
    expect(stack.tokens.invalidations).toBe(0);
  });

  it('2,000 header fields: 431, nothing forwarded, no token invalidated', async () => {
    const before = standin.apiRequests.length;
    const conn = rawConnection(stack.port);
    conn.socket.write(GET('/v1.0/contracts/', fields(1_999)));
    await waitFor(() => conn.statuses().length === 1, 5_000, 'the 431');
    expect(conn.statuses()).toEqual([431]);
    expect(conn.text()).toContain('"request_headers_too_large"');
    conn.socket.destroy();
    // Node 20 parses it and the handler answers; Node 24's parser refuses it as too large (and
    // the answer ends the connection). Either way nothing reaches the upstream.
    const after = await request(`${stack.url}/v1.0/contracts/`, { dispatcher: client });
    await after.body.text();
    expect(standin.apiRequests.length).toBe(before + 1);
    expect(stack.tokens.invalidations).toBe(0);
  });

  it('exactly maxHeaders fields are forwarded', async () => {
    const conn = rawConnection(stack.port);
    conn.socket.write(GET('/v1.0/contracts/', fields(99)));
    await waitFor(() => conn.statuses().length === 1, 5_000, 'the answer');
    expect(conn.statuses()).toEqual([200]);
    conn.socket.destroy();
  });

  it('two Host headers: 400 bad_request, nothing forwarded', async () => {
    const before = standin.apiRequests.length;
    const conn = rawConnection(stack.port);
    conn.socket.write(GET('/v1.0/contracts/', 'Host: other.example\r\n'));
    await waitFor(() => conn.statuses().length === 1, 5_000, 'the 400');
    expect(conn.statuses()).toEqual([400]);
    expect(conn.text()).toContain('"bad_request"');
    conn.socket.destroy();
    expect(standin.apiRequests.length).toBe(before);
  });

  it('sends the bearer first and drops Via and X-Real-IP', async () => {
    const res = await request(`${stack.url}/v1.0/echo`, {
      dispatcher: client,
      headers: { via: '1.1 gateway', 'x-real-ip': '10.1.2.3', 'x-keep': 'yes' },
    });
    await res.body.text();
    const seen = standin.apiRequests[standin.apiRequests.length - 1]!.headers;
    expect(seen.via).toBeUndefined();
    expect(seen['x-real-ip']).toBeUndefined();
    expect(seen['x-keep']).toBe('yes');
  });
});

describe('sockets the sidecar closes', () => {
  it('a socket answered 400 by the parser is released although the client never reads or closes', async () => {
    const stack = await startStack(standin);
    try {
      const conn = rawConnection(stack.port, { allowHalfOpen: true });
      conn.socket.write('GET /v1.0/ HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n');
      await waitFor(() => conn.statuses().length === 1, 5_000, 'the 400');
      await waitFor(
        () =>
          new Promise<boolean>((resolve) =>
            stack.proxy.server.getConnections((_err, n) => resolve(n === 0)),
          ),
        10_000,
        'the server to release the socket',
      );
      conn.socket.destroy();
    } finally {
      await stack.close();
    }
  });
});

describe('proxy.bodyTimeoutMs', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(standin, { limits: { bodyTimeoutMs: 300 } });
  });
  afterAll(() => stack.close());

  it.each([
    ['a small body (buffered for replay)', 100, 10],
    ['a large body (streamed upstream)', 200_000, 100_000],
  ])(
    '%s that stalls: 408 request_timeout and the connection closed',
    async (_what, length, sent) => {
      const conn = rawConnection(stack.port);
      conn.socket.write(
        `POST /v1.0/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${length}\r\n\r\n`,
      );
      conn.socket.write(Buffer.alloc(sent, 'a'));
      await waitFor(() => conn.statuses().length === 1, 10_000, 'the 408');
      expect(conn.statuses()).toEqual([408]);
      expect(conn.text()).toContain('"request_timeout"');
      await waitFor(() => conn.ended(), 10_000, 'the connection to close');
      conn.socket.destroy();
    },
  );
});

/** `oauth_sidecar_requests_in_flight` as the stack's registry reads it now. */
async function inFlightOf(stack: Stack): Promise<number> {
  return (await stack.metrics.requestsInFlight.get()).values[0]?.value ?? 0;
}
describe('a request waiting for a free upstream connection', () => {
  it('gets its 504 at upstream.timeoutMs, stays counted until the pool drops it, and costs no connection; a waiting request whose client left gives its slot back at once and is not sent', async () => {
    let held: (() => void) | undefined;
    const upstream = await startCountingUpstream(pki, (req, res, done) => {
      const answer = () => {
        res.end('{"ok":true}');
        done();
      };
      if (req.url === '/v1.0/hold') {
        // Its head at once (no upstream timeout), its body when the test says so.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.flushHeaders();
        held = answer;
      } else answer();
    });
    const stack = await startStack(standin, {
      upstream: upstream.url,
      timeoutMs: 300,
      limits: { maxConnections: 1 },
    });
    const inFlight = () => inFlightOf(stack);
    try {
      // The only connection: taken by an answer whose body ends when the test says so.
      const first = request(`${stack.url}/v1.0/hold`, { dispatcher: client });
      await waitFor(() => held !== undefined, 5_000, 'the first request upstream');
      const queued = await request(`${stack.url}/v1.0/queued`, { dispatcher: client });
      expect(queued.statusCode).toBe(504);
      expect(envelopeCode(await queued.body.text())).toBe('upstream_timeout');
      // Answered at the timeout, not when the connection came free: it is still taken.
      expect(held).toBeDefined();
      // A second waiting request whose client leaves.
      const controller = new AbortController();
      const gone = request(`${stack.url}/v1.0/gone`, {
        dispatcher: client,
        signal: controller.signal,
        headers: { 'x-request-id': 'gone-1' },
      }).catch(() => undefined);
      await waitFor(async () => (await inFlight()) === 3, 5_000, 'the third request in flight');
      controller.abort();
      await gone;
      // The sidecar saw it leave: its line says 499 while it still waits in the pool.
      await waitFor(
        () => stack.logs.some((l) => l.requestId === 'gone-1' && l.status === 499),
        5_000,
        'the line of the request whose client left',
      );
      // Both still wait in the pool. The 504 counts against proxy.maxInFlight until the pool
      // drops it; the one whose client left gave its slot back at once.
      expect(await inFlight()).toBe(2);
      held!();
      const firstAnswer = await first;
      expect(firstAnswer.statusCode).toBe(200);
      await firstAnswer.body.dump();
      await waitFor(async () => (await inFlight()) === 0, 5_000, 'every request released');
      // Neither waiting request reached the upstream, and the one connection was kept.
      expect(upstream.requests).toBe(1);
      expect(upstream.connections).toBe(1);
      const after = await request(`${stack.url}/v1.0/after`, { dispatcher: client });
      expect(after.statusCode).toBe(200);
      await after.body.dump();
      expect(upstream.connections).toBe(1);
    } finally {
      await stack.close();
      await upstream.close();
    }
  });
});

describe('a client that leaves while its request is upstream', () => {
  it('keeps the connection: a small answer is read and dropped, a large or late one costs the connection; the slot is given back at once', async () => {
    const release = new Map<string, () => void>();
    const upstream = await startCountingUpstream(pki, (req, res, done) => {
      const size = req.url === '/v1.0/large' ? 256 * 1024 : 16;
      release.set(req.url ?? '', () => {
        res.end('x'.repeat(size));
        done();
      });
      if (req.url === '/v1.0/now') release.get(req.url)!();
    });
    const stack = await startStack(standin, {
      upstream: upstream.url,
      limits: { maxConnections: 1 },
    });
    const inFlight = () => inFlightOf(stack);
    const leave = async (path: string, id: string) => {
      const controller = new AbortController();
      const pending = request(`${stack.url}${path}`, {
        dispatcher: client,
        signal: controller.signal,
        headers: { 'x-request-id': id },
      }).catch(() => undefined);
      await waitFor(() => release.has(path), 5_000, `${path} upstream`);
      controller.abort();
      await pending;
      await waitFor(
        () => stack.logs.some((l) => l.requestId === id && l.status === 499),
        5_000,
        `the line of ${id}`,
      );
    };
    const ok = async () => {
      const res = await request(`${stack.url}/v1.0/now`, { dispatcher: client });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
    };
    try {
      await leave('/v1.0/small', 'small-1');
      // Not counted while its answer is outstanding: its client left.
      expect(await inFlight()).toBe(0);
      release.get('/v1.0/small')!();
      await waitFor(async () => (await inFlight()) === 0, 5_000, 'the small answer dropped');
      await ok();
      expect(upstream.connections).toBe(1);

      await leave('/v1.0/large', 'large-1');
      release.get('/v1.0/large')!();
      await waitFor(async () => (await inFlight()) === 0, 5_000, 'the large answer cut');
      await ok();
      expect(upstream.connections).toBe(2);

      // An answer that does not come within CLIENT_GONE_DRAIN_MS costs the connection, so the
      // next request (one connection allowed) does not wait for it.
      await leave('/v1.0/late', 'late-1');
      expect(await inFlight()).toBe(0);
      // The late answer never comes: `ok()` is answered only because its connection was dropped.
      await ok();
      expect(upstream.connections).toBe(3);
    } finally {
      await stack.close();
      await upstream.close();
    }
  });
});

describe('upstream.bodyTimeoutMs', () => {
  it('an upstream that stalls inside its body aborts the client response after the pause', async () => {
    const stack = await startStack(standin, { limits: { upstreamBodyTimeoutMs: 300 } });
    try {
      const res = await request(`${stack.url}/v1.0/slow-body/20000`, { dispatcher: client });
      expect(res.statusCode).toBe(200);
      await expect(res.body.text()).rejects.toThrow();
      await waitFor(
        () => stack.logs.some((l) => l.msg === 'request' && l.result === 'upstream_failed'),
        2_000,
        'the request line',
      );
    } finally {
      await stack.close();
    }
  });
});

describe('an upstream 204 with a body', () => {
  it('reaches the client as a clean 204 and the client connection stays usable', async () => {
    const raw = await startRawUpstream(
      pki,
      'HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello',
    );
    const stack = await startStack(standin, { upstream: raw.url });
    try {
      const conn = rawConnection(stack.port);
      conn.socket.write(GET('/v1.0/empty'));
      await waitFor(() => conn.statuses().length === 1, 5_000, 'the 204');
      expect(conn.statuses()).toEqual([204]);
      conn.socket.write(GET('/v1.0/empty'));
      await waitFor(
        () => conn.statuses().length === 2,
        5_000,
        'a second answer on the same socket',
      );
      expect(conn.statuses()).toEqual([204, 204]);
      expect(conn.text()).not.toContain('hello');
      expect(conn.ended()).toBe(false);
      conn.socket.destroy();
      await waitFor(
        () => stack.logs.filter((l) => l.msg === 'request').length === 2,
        5_000,
        'both request lines',
      );
      const lines = stack.logs.filter((l) => l.msg === 'request');
      expect(lines.map((l) => [l.status, l.result])).toEqual([
        [204, undefined],
        [204, undefined],
      ]);
    } finally {
      await stack.close();
      await raw.close();
    }
  });
});

describe('h2c streams the client resets', () => {
  it('are never forwarded, whatever stage they were waiting in; at most 100 streams per session', async () => {
    const stack = await startStack(standin, { http2: true });
    const session = connectH2(stack.url);
    try {
      await new Promise<void>((resolve) => session.once('remoteSettings', () => resolve()));
      expect(session.remoteSettings.maxConcurrentStreams).toBe(100);
      // A token held before the storm: the test's token source fetches one per waiter released
      // without one (the keeper would share a single request), and 100 fetches at once outlast
      // the upstream timeout of the request after the storm on a loaded machine.
      await stack.tokens.getAccessToken();
      const before = standin.apiRequests.length;
      let closedOnServer = 0;
      stack.proxy.server.on('stream', (stream: { once(e: 'close', f: () => void): void }) =>
        stream.once('close', () => (closedOnServer += 1)),
      );
      // Two batches of the session's 100: the second opens only if the first's streams were closed.
      for (let batch = 0; batch < 2; batch++) {
        const release = stack.tokens.hold();
        const streams = [];
        for (let i = 0; i < 100; i++) {
          const stream = session.request({ ':path': `/v1.0/contracts/?reset=${batch}-${i}` });
          stream.on('error', () => undefined);
          streams.push(stream);
        }
        await waitFor(
          () => stack.tokens.waiting === 100,
          10_000,
          'every stream waiting for a token',
        );
        for (const stream of streams) stream.close(h2.NGHTTP2_CANCEL);
        await waitFor(
          () => closedOnServer === (batch + 1) * 100,
          5_000,
          'every stream closed on the server',
        );
        release();
        await waitFor(() => stack.tokens.waiting === 0, 5_000, 'the waiters released');
      }
      // One request after the storm proves the path works; the reset ones never arrived.
      const ok = session.request({ ':path': '/v1.0/contracts/' });
      ok.resume();
      await new Promise<void>((resolve) => ok.once('close', () => resolve()));
      await waitFor(() => standin.apiRequests.length > before, 5_000, 'the last request');
      expect(standin.apiRequests.slice(before).map((r) => r.url)).toEqual(['/v1.0/contracts/']);
    } finally {
      session.destroy();
      await stack.close();
    }
  });
});
