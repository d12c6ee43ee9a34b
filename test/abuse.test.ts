/**
 * Protocol abuse against the real sidecar (`node dist/main.js`, built by `npm test`) in front of the
 * real stand-in. Raw sockets send what no well-behaved client would: request smuggling shapes,
 * obsolete folding, absolute- and authority-form targets, control characters, oversized headers,
 * and a few thousand generated path variants. Each request must be rejected with a 4xx and never
 * reach the upstream, or be forwarded only under the allowed prefix to the configured upstream.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandin, type RecordedApiRequest, type Standin } from '../src/standin/index.js';
import {
  startSidecarProcess,
  waitFor,
  waitReady,
  type SidecarProcess,
} from './helpers/sidecar-process.js';

const ALLOWED_PREFIX = '/v1.0/';

let standin: Standin;
let sidecar: SidecarProcess;
let proxyPort: number;
let workDir: string;
/** A plain HTTP server that must never see a request: absolute-form targets and Host headers point at it. */
let canary: Server;
let canaryPort: number;
let canaryHits = 0;
let barriers = 0;

/**
 * Wait until a request sent after `answer` has reached the upstream: anything the sidecar might
 * still forward from an earlier exchange would have arrived by then (a condition, not a sleep).
 */
async function barrier(): Promise<void> {
  const id = `abuse-barrier-${++barriers}`;
  const answer = await exchange(
    `GET /v1.0/contracts/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: ${id}\r\nConnection: close\r\n\r\n`,
  );
  expect(answer.status).toBe(200);
  await waitFor(() => forwardedWithId(id).length === 1, 5_000, 'the barrier request upstream');
}

interface RawAnswer {
  /** Undefined when the connection closed (or timed out) without a status line. */
  status: number | undefined;
  head: string;
  body: string;
}

/** Write raw bytes, read one answer (by Content-Length, chunked end, or close). */
async function exchange(bytes: string | Buffer, timeoutMs = 5000): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect(proxyPort, '127.0.0.1');
    let data = Buffer.alloc(0);
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const text = data.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const head = end === -1 ? text : text.slice(0, end);
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(head);
      resolve({
        status: match ? Number(match[1]) : undefined,
        head,
        body: end === -1 ? '' : text.slice(end + 4),
      });
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      const text = data.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = text.slice(0, end).toLowerCase();
      const length = /\r\ncontent-length: *(\d+)/.exec(head);
      if (length && data.length >= end + 4 + Number(length[1])) finish();
      else if (/\r\ntransfer-encoding: *chunked/.test(head) && text.endsWith('0\r\n\r\n')) finish();
    });
    socket.on('error', finish);
    socket.on('close', finish);
    socket.write(bytes);
  });
}

/** Dot segments resolved the way a lenient upstream might: %2e/%2f/%5c decoded once, `\` as `/`. */
function resolvedPath(target: string): string {
  const path = target.split('?')[0]!;
  const decoded = path
    .replace(/%2e/gi, '.')
    .replace(/%2f/gi, '/')
    .replace(/%5c/gi, '/')
    .replace(/\\/g, '/');
  if (!decoded.startsWith('/')) return decoded;
  return new URL(`http://upstream.invalid${decoded}`).pathname;
}

function forwardedWithId(id: string): RecordedApiRequest[] {
  return standin.apiRequests.filter((r) => r.headers['x-request-id'] === id);
}

/** Sends `raw`, expects a 4xx answer, nothing forwarded and nothing at the canary. */
async function expectRejected(raw: string | Buffer, statuses?: number[]): Promise<RawAnswer> {
  const before = standin.apiRequests.length;
  const answer = await exchange(raw);
  await barrier();
  expect(
    answer.status,
    `answer: ${answer.head || '(connection closed without an answer)'}`,
  ).toBeDefined();
  if (statuses) expect(statuses).toContain(answer.status);
  expect(answer.status).toBeGreaterThanOrEqual(400);
  expect(answer.status).toBeLessThan(500);
  expect(
    standin.apiRequests
      .slice(before)
      .filter((r) => !String(r.headers['x-request-id']).startsWith('abuse-barrier-'))
      .map((r) => `${r.method} ${r.url}`),
  ).toEqual([]);
  expect(canaryHits).toBe(0);
  return answer;
}

function envelopeCode(answer: RawAnswer): string | undefined {
  try {
    const body = JSON.parse(answer.body) as { errors?: { code?: string }[] };
    return body.errors?.[0]?.code;
  } catch {
    return undefined;
  }
}

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), 'oauth-sidecar-abuse-'));
  standin = await startStandin({ clientId: 'abuse-client', clientSecret: 'abuse-secret' });
  const caFile = join(workDir, 'ca.pem');
  writeFileSync(caFile, standin.caCert);
  canary = createHttpServer((_req, res) => {
    canaryHits++;
    res.end('canary');
  });
  await new Promise<void>((resolve) => canary.listen(0, '127.0.0.1', resolve));
  const address = canary.address();
  canaryPort = typeof address === 'object' && address !== null ? address.port : 0;

  sidecar = await startSidecarProcess({
    UPSTREAM_BASE_URL: standin.url,
    UPSTREAM_CA_FILE: caFile,
    CLIENT_ID: 'abuse-client',
    CLIENT_SECRET: 'abuse-secret',
    // info: the helper waits for the "listening" line.
    LOG_LEVEL: 'info',
  });
  proxyPort = Number(new URL(sidecar.proxyUrl).port);
  await waitReady(sidecar, 20_000);
});

afterAll(async () => {
  await sidecar?.stop();
  await standin?.close();
  await new Promise((resolve) => canary?.close(resolve));
  rmSync(workDir, { recursive: true, force: true });
});

describe('raw protocol abuse', () => {
  it('forwards a plain request (the harness works)', async () => {
    const answer = await exchange(
      'GET /v1.0/contracts/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: abuse-plain\r\nConnection: close\r\n\r\n',
    );
    expect(answer.status).toBe(200);
    expect(forwardedWithId('abuse-plain').map((r) => r.url)).toEqual(['/v1.0/contracts/']);
  });

  it('rejects Content-Length together with Transfer-Encoding, and smuggles nothing', async () => {
    await expectRejected(
      'POST /v1.0/echo/a HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n' +
        '0\r\n\r\nGET /admin HTTP/1.1\r\nHost: x\r\n\r\n',
    );
  });

  it('rejects duplicate Content-Length, equal or not', async () => {
    await expectRejected(
      'POST /v1.0/echo/a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde',
    );
    await expectRejected(
      'POST /v1.0/echo/a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd',
    );
  });

  it('rejects obscured Transfer-Encoding', async () => {
    await expectRejected(
      'POST /v1.0/echo/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n',
    );
    await expectRejected(
      'POST /v1.0/echo/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n',
    );
  });

  it('rejects obsolete line folding', async () => {
    await expectRejected('GET /v1.0/contracts/ HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n');
    await expectRejected('GET /v1.0/contracts/ HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n\tb\r\n\r\n');
  });

  it('rejects absolute-form targets with 400 bad_request, whatever the host', async () => {
    for (const origin of ['http://evil.example', `http://127.0.0.1:${canaryPort}`, standin.url]) {
      const answer = await expectRejected(
        `GET ${origin}/v1.0/contracts/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
        [400],
      );
      expect(envelopeCode(answer)).toBe('bad_request');
    }
  });

  it('rejects percent-encoded control characters (%00-%1F, %7F) in the path or query with 400 bad_request, never forwarded', async () => {
    const codes = ['%00', '%0a', '%0D', '%1f', '%1F', '%7f', '%7F', '%09'];
    for (const code of codes) {
      for (const target of [`/v1.0/contracts/p${code}`, `/v1.0/contracts/?q=a${code}b`]) {
        const answer = await expectRejected(
          `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
          [400],
        );
        expect(envelopeCode(answer), target).toBe('bad_request');
      }
    }
    // Printable escapes still pass: %20, %7E, %80 and above are no control characters.
    const fine = await exchange(
      'GET /v1.0/contracts/?q=%20%7E%C3%A9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    expect(fine.status).toBe(200);
  });

  it('answers authority-form CONNECT and TRACE with 405', async () => {
    await expectRejected(
      'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n',
      [405],
    );
    await expectRejected(
      `CONNECT 127.0.0.1:${canaryPort} HTTP/1.1\r\nHost: 127.0.0.1:${canaryPort}\r\n\r\n`,
      [405],
    );
    const trace = await expectRejected(
      'TRACE /v1.0/contracts/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      [405],
    );
    expect(envelopeCode(trace)).toBe('method_not_allowed');
  });

  it('rejects asterisk-form and targets without a leading slash', async () => {
    await expectRejected('OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await expectRejected('GET v1.0/contracts/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  });

  it('rejects control characters in header names and values', async () => {
    const base = 'GET /v1.0/contracts/ HTTP/1.1\r\nHost: x\r\n';
    for (const header of [
      'X-\x01Name: a',
      'X Name: a',
      'X-Name\x7f: a',
      'X-Value: a\x01b',
      'X-Value: a\x00b',
      'X-Value: a\rb',
      'X-Value: a\x7fb',
    ]) {
      await expectRejected(`${base}${header}\r\nConnection: close\r\n\r\n`);
    }
  });

  it('rejects bare-LF line endings', async () => {
    await expectRejected('GET /v1.0/contracts/ HTTP/1.1\nHost: x\nConnection: close\n\n');
  });

  it('rejects oversized headers (> 16 KB) with 431', async () => {
    await expectRejected(
      `GET /v1.0/contracts/ HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\nConnection: close\r\n\r\n`,
      [431],
    );
    const many = Array.from({ length: 400 }, (_, i) => `X-H${i}: ${'b'.repeat(50)}\r\n`).join('');
    await expectRejected(
      `GET /v1.0/contracts/ HTTP/1.1\r\nHost: x\r\n${many}Connection: close\r\n\r\n`,
      [431],
    );
  });

  it('sends the upstream its own Host and the sidecar token, whatever the client said', async () => {
    const before = standin.apiRequests.length;
    const answer = await exchange(
      `GET /v1.0/contracts/ HTTP/1.1\r\nHost: 127.0.0.1:${canaryPort}\r\nHost: evil.example\r\n` +
        'Authorization: Bearer attacker\r\nProxy-Authorization: Basic YTpi\r\nX-Request-Id: abuse-host\r\nConnection: close\r\n\r\n',
    );
    const forwarded = forwardedWithId('abuse-host');
    if (
      answer.status !== undefined &&
      answer.status >= 400 &&
      answer.status < 500 &&
      forwarded.length === 0
    ) {
      expect(standin.apiRequests.length).toBe(before); // rejected outright: fine
    } else {
      expect(answer.status).toBe(200);
      expect(forwarded).toHaveLength(1);
      expect(forwarded[0]!.headers.host).toBe(new URL(standin.url).host);
      expect(forwarded[0]!.token).not.toBe('attacker');
      expect(standin.issuedTokens()).toContain(forwarded[0]!.token);
      expect(forwarded[0]!.headers['proxy-authorization']).toBeUndefined();
    }
    expect(canaryHits).toBe(0);
  });
});

describe('generated request targets', () => {
  const safeSegment = fc.constantFrom('contracts', 'echo', 'a', 'x.y', '~', 'a;b', '', 'v1.0');
  const nastySegment = fc.constantFrom(
    '.',
    '..',
    '...',
    '%2e',
    '%2E',
    '%2e%2e',
    '%2E%2e',
    '.%2e',
    '%2e.',
    '%2f',
    '%2F',
    '%5c',
    '%5C',
    '\\',
    '..\\',
    '%252e%252e',
    '%00',
    '%ff',
    'é',
    '日本',
    '%C3%A9',
    ';',
    '%20',
    '+',
    ':',
    '@',
    'V1.0',
    '%76%31%2e%30',
    'v1%2e0',
  );
  const segment = fc.oneof(
    { arbitrary: safeSegment, weight: 4 },
    { arbitrary: nastySegment, weight: 1 },
  );
  const separator = fc.constantFrom(
    '/',
    '/',
    '/',
    '/',
    '/',
    '/',
    '//',
    '\\',
    '%2f',
    '/./',
    '/../',
    '/%2e%2e/',
  );
  const start = fc.oneof(
    { arbitrary: fc.constant('/v1.0/'), weight: 6 },
    fc.constantFrom('/', '/v1.0', '/v1.0//', '\\v1.0\\', '/beta/', '/./v1.0/', '//'),
  );
  const query = fc
    .array(
      fc.constantFrom('a=1', '..', '%2e%2e', '/../', 'x=%2f', 'b=\\', '?', 'c=%5c', 'u=%C3%A9'),
      {
        maxLength: 3,
      },
    )
    .map((parts) => parts.join('&'));
  const target = fc
    .tuple(
      start,
      fc.array(fc.tuple(segment, separator), { maxLength: 6 }),
      segment,
      fc.option(query),
    )
    .map(
      ([head, pairs, last, q]) =>
        head + pairs.map(([s, sep]) => s + sep).join('') + last + (q === null ? '' : `?${q}`),
    );

  it('are rejected with a 4xx, or forwarded only under the allowed prefix', async () => {
    let n = 0;
    const tally = { forwarded: 0, rejected: 0 };
    /** One target on its own connection; its id tells what reached the upstream. */
    const check = async (path: string): Promise<void> => {
      const id = `fuzz-${n++}`;
      const answer = await exchange(
        Buffer.concat([
          Buffer.from('GET '),
          Buffer.from(path, 'utf8'),
          Buffer.from(
            ` HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: ${id}\r\nConnection: close\r\n\r\n`,
          ),
        ]),
      );
      const forwarded = forwardedWithId(id);
      if (forwarded.length === 0) {
        tally.rejected++;
        expect(answer.status, `${path} → ${answer.head}`).toBeGreaterThanOrEqual(400);
        expect(answer.status, `${path} → ${answer.head}`).toBeLessThan(500);
      } else {
        tally.forwarded++;
        expect(forwarded).toHaveLength(1);
        expect(
          resolvedPath(forwarded[0]!.url),
          `${path} forwarded as ${forwarded[0]!.url}`,
        ).toMatch(/^\/v1\.0\//);
      }
    };
    // 2,000 targets, 20 at once (each on its own connection): the sidecar answers them side by
    // side instead of one round trip after another. A failing batch shrinks like a single target.
    await fc.assert(
      fc.asyncProperty(fc.array(target, { minLength: 20, maxLength: 20 }), async (paths) => {
        await Promise.all(paths.map(check));
      }),
      { numRuns: 100 },
    );
    // Everything the upstream ever saw in this file, resolved, stays under the prefix.
    for (const r of standin.apiRequests)
      expect(resolvedPath(r.url).startsWith(ALLOWED_PREFIX)).toBe(true);
    expect(canaryHits).toBe(0);
    // Both outcomes were exercised, or the generator is not doing its job.
    expect(tally.forwarded).toBeGreaterThan(50);
    expect(tally.rejected).toBeGreaterThan(50);
  });
});
