import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, MockAgent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/helpers/sidecar-process.js';
import { TokenEndpointError, isRejectedGrant } from '../errors.js';
import {
  MAX_ANSWER_BYTES,
  checkTokenResponse,
  createTokenEndpointClient,
  sendGrantRequest,
  type TokenClientOptions,
} from './client.js';
import { DEFAULT_LIFETIME_SECONDS } from './token-body.js';
import type { GrantRequest } from './types.js';
import { tokenAnswer, type TokenAnswer } from './wire.js';
import { USER_AGENT } from '../version.js';

const ACCESS = 'at-SECRET-ACCESS-TOKEN';
const REFRESH = 'rt-SECRET-REFRESH-TOKEN';
const CLIENT_SECRET = 'demo-SECRET';

/**
 * A hand-made answer, as `sendGrantRequest` returns it, with the arguments of `answer(body,
 * init)`. Over-the-cap bodies go through the wire (the `sendGrantRequest` tests below).
 */
function answer(
  body: string | null = null,
  init: { status?: number; headers?: Record<string, string> } = {},
): TokenAnswer {
  const headers = Object.fromEntries(
    Object.entries(init.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]),
  );
  return tokenAnswer(init.status ?? 200, headers, body ?? '', false);
}

function json(body: unknown, status = 201, headers: Record<string, string> = {}): TokenAnswer {
  return answer(typeof body === 'string' ? body : JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

function checkError(response: TokenAnswer): TokenEndpointError {
  let error: unknown;
  try {
    checkTokenResponse(response, { now: () => 0 });
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(TokenEndpointError);
  const e = error as TokenEndpointError;
  for (const secret of [ACCESS, REFRESH, CLIENT_SECRET]) {
    expect(e.message).not.toContain(secret);
    expect(JSON.stringify(e)).not.toContain(secret);
  }
  return e;
}

describe('checkTokenResponse: success', () => {
  it('accepts the camelCase answer with 201', () => {
    const set = checkTokenResponse(
      json({ accessToken: ACCESS, refreshToken: REFRESH, tokenType: 'Bearer', expiresIn: 1799 }),
    );
    expect(set).toEqual({
      accessToken: ACCESS,
      refreshToken: REFRESH,
      tokenType: 'bearer',
      expiresInSeconds: 1799,
      lifetimeDefaulted: false,
    });
  });

  it.each([200, 201, 203])('accepts snake_case with %i, token type in any case', (status) => {
    const set = checkTokenResponse(
      json({ access_token: ACCESS, token_type: 'bEaReR', expires_in: 1800 }, status),
    );
    expect(set.accessToken).toBe(ACCESS);
    expect(set.tokenType).toBe('bearer');
    expect(set.expiresInSeconds).toBe(1800);
    expect(set.refreshToken).toBeUndefined();
  });

  it('parses JSON whatever the content-type says', () => {
    const res = answer(JSON.stringify({ accessToken: ACCESS, tokenType: 'Bearer' }), {
      status: 201,
      headers: { 'content-type': 'text/plain' },
    });
    expect(checkTokenResponse(res).accessToken).toBe(ACCESS);
  });

  it('defaults a missing expiresIn', () => {
    const set = checkTokenResponse(json({ accessToken: ACCESS, tokenType: 'Bearer' }));
    expect(DEFAULT_LIFETIME_SECONDS).toBe(300);
    expect(set.expiresInSeconds).toBe(300);
    expect(set.lifetimeDefaulted).toBe(true);
  });

  it.each([
    [0, 0],
    ['1799', 1799],
    ['0', 0],
  ])('accepts expiresIn %j', (value, seconds) => {
    const set = checkTokenResponse(
      json({ accessToken: ACCESS, tokenType: 'Bearer', expiresIn: value }),
    );
    expect(set.expiresInSeconds).toBe(seconds);
    expect(set.lifetimeDefaulted).toBe(false);
  });

  it('maps a null refresh token to null and a string to itself', () => {
    const base = { accessToken: ACCESS, tokenType: 'Bearer', expiresIn: 1 };
    expect(checkTokenResponse(json({ ...base, refreshToken: null })).refreshToken).toBe(null);
    expect(checkTokenResponse(json({ ...base, refresh_token: REFRESH })).refreshToken).toBe(
      REFRESH,
    );
  });
});

describe('checkTokenResponse: malformed answers', () => {
  const good = { accessToken: ACCESS, tokenType: 'Bearer', expiresIn: 60, refreshToken: REFRESH };

  it.each([
    [{ ...good, accessToken: undefined }, '"accessToken" (or "access_token") is missing'],
    [
      { ...good, accessToken: '' },
      '"accessToken" must be a non-empty string (got an empty string)',
    ],
    [{ ...good, accessToken: 12 }, '"accessToken" must be a non-empty string (got a number)'],
    [
      { ...good, tokenType: undefined, token_type: 'mac' },
      '"token_type" must be "Bearer" (got "mac")',
    ],
    [{ ...good, tokenType: 'mac' }, '"tokenType" must be "Bearer" (got "mac")'],
    [{ ...good, tokenType: undefined }, '"tokenType" (or "token_type") is missing'],
    [{ ...good, expiresIn: 'abc' }, '"expiresIn" must be a non-negative integer (got "abc")'],
    [{ ...good, expiresIn: -5 }, '"expiresIn" must be a non-negative integer (got -5)'],
    [{ ...good, expiresIn: '-5' }, '"expiresIn" must be a non-negative integer (got "-5")'],
    [{ ...good, expiresIn: 1.5 }, '"expiresIn" must be a non-negative integer (got 1.5)'],
    [{ ...good, expiresIn: null }, '"expiresIn" must be a non-negative integer (got null)'],
    [{ ...good, expires_in: true, expiresIn: undefined }, '"expires_in" must be a non-negative'],
    [
      { ...good, refreshToken: 5 },
      '"refreshToken" must be a non-empty string or null (got a number)',
    ],
    [
      { ...good, refreshToken: {} },
      '"refreshToken" must be a non-empty string or null (got an object)',
    ],
    [
      { ...good, expiresIn: 1e12 },
      '"expiresIn" must be at most 2147483647 seconds (got 1000000000000)',
    ],
    [
      { ...good, expiresIn: 2 ** 31 },
      '"expiresIn" must be at most 2147483647 seconds (got 2147483648)',
    ],
    [{ ...good, expires_in: '99999999999', expiresIn: undefined }, '"expires_in" must be at most'],
    [
      { ...good, accessToken: 'at-line\r\nX-Injected: 1' },
      '"accessToken" must be an RFC 6750 b64token',
    ],
    [{ ...good, accessToken: 'at with space' }, '"accessToken" must be an RFC 6750 b64token'],
    [{ ...good, accessToken: 'at-nön-ascii' }, '"accessToken" must be an RFC 6750 b64token'],
    [{ ...good, accessToken: 'a=b' }, '"accessToken" must be an RFC 6750 b64token'],
    [[good], 'must be a JSON object (got an array)'],
    [null, 'must be a JSON object (got null)'],
  ])('%j → %s', (body, message) => {
    const e = checkError(json(body));
    expect(e.kind).toBe('malformed');
    expect(e.status).toBe(201);
    expect(e.message).toContain('token endpoint answer');
    expect(e.message).toContain(message);
  });

  it('accepts the largest lifetime and a b64token of 8 KiB with padding', () => {
    const token = `${'A'.repeat(8190)}==`;
    const set = checkTokenResponse(json({ ...good, accessToken: token, expiresIn: 2 ** 31 - 1 }));
    expect(set).toMatchObject({ expiresInSeconds: 2 ** 31 - 1 });
    expect(set.accessToken).toBe(token);
  });

  it('refuses an access token over 8 KiB', () => {
    const e = checkError(json({ ...good, accessToken: 'a'.repeat(8193) }));
    expect(e.kind).toBe('malformed');
    expect(e.message).toContain('"accessToken" must be an RFC 6750 b64token');
    expect(e.message).toContain('of at most 8192 characters (got 8193 characters)');
  });

  it('never shows a refused access token in the message', () => {
    const e = checkError(json({ ...good, accessToken: `${ACCESS}\r\n` }));
    expect(e.kind).toBe('malformed');
    expect(e.message).not.toContain(ACCESS);
    expect(e.message).toContain('"accessToken"');
  });

  it('names content-type and length of a non-JSON body, never its content', () => {
    const html = `<html>${ACCESS}</html>`;
    const e = checkError(answer(html, { status: 200, headers: { 'content-type': 'text/html' } }));
    expect(e.kind).toBe('malformed');
    expect(e.message).toBe(
      `token endpoint answer is not JSON (content-type text/html, ${html.length} bytes)`,
    );
    expect((e as unknown as { body: string }).body).toBe(html);
    expect(Object.keys(e)).not.toContain('body');
  });

  it('an answer over the cap is malformed, with its status', () => {
    const e = checkError(tokenAnswer(201, {}, '', true));
    expect(e.kind).toBe('malformed');
    expect(e.status).toBe(201);
    expect(e.message).toBe('token endpoint answer larger than 65536 bytes');
  });
});

describe('checkTokenResponse: error statuses', () => {
  it('3xx is a redirect naming the Location without its query', () => {
    const e = checkError(
      answer(null, {
        status: 302,
        headers: { location: `https://u:p@elsewhere.example/login?code=${ACCESS}` },
      }),
    );
    expect(e.kind).toBe('redirect');
    expect(e.status).toBe(302);
    expect(e.message).toBe(
      'token endpoint answered 302 redirect to https://elsewhere.example/login; redirects are not followed',
    );
  });

  it('names a relative Location', () => {
    const e = checkError(answer(null, { status: 307, headers: { location: '/other/' } }));
    expect(e.message).toContain('redirect to /other/');
  });

  it('401 with an OAuth error body is rejected', () => {
    const e = checkError(
      json({ error: 'invalid_client', error_description: 'Client authentication failed' }, 401),
    );
    expect(e.kind).toBe('rejected');
    expect(isRejectedGrant(e)).toBe(true);
    expect(e.status).toBe(401);
    expect(e.oauthError).toBe('invalid_client');
    expect(e.message).toBe(
      'token endpoint answered 401 invalid_client: Client authentication failed',
    );
  });

  it("400 with the API's errors envelope is rejected", () => {
    const e = checkError(
      json({ errors: [{ code: 'invalid_grant', detail: 'refresh token expired' }] }, 400),
    );
    expect(e.kind).toBe('rejected');
    expect(e.oauthError).toBe('invalid_grant');
    expect(e.message).toBe('token endpoint answered 400 invalid_grant: refresh token expired');
  });

  it('strips control characters and caps the description', () => {
    const e = checkError(
      json(
        { error: 'invalid_request\n', error_description: `line1\nline2\u0000${'x'.repeat(500)}` },
        400,
      ),
    );
    expect(e.oauthError).toBe('invalid_request');
    expect(e.message).not.toContain('\n');
    expect(e.message).not.toContain('\u0000');
    expect(e.message.length).toBeLessThan(260);
    expect(e.message).toContain('line1 line2 x');
  });

  it('a 403 without a JSON body names only content-type and length', () => {
    const e = checkError(
      answer('forbidden', { status: 403, headers: { 'content-type': 'text/plain' } }),
    );
    expect(e.kind).toBe('rejected');
    expect(e.oauthError).toBeUndefined();
    expect(e.message).toBe('token endpoint answered 403 (content-type text/plain, 9 bytes)');
  });

  it('500 is a server error with Retry-After in seconds', () => {
    const e = checkError(answer('oops', { status: 500, headers: { 'retry-after': '30' } }));
    expect(e.kind).toBe('server');
    expect(isRejectedGrant(e)).toBe(false);
    expect(e.retryAfterMs).toBe(30_000);
    expect(e.message).toContain('token endpoint answered 500');
    expect(e.message).toContain('retry after 30 s');
  });

  it('429 is a server error with an HTTP-date Retry-After', () => {
    const at = new Date(120_000).toUTCString();
    const e = checkError(answer(null, { status: 429, headers: { 'retry-after': at } }));
    expect(e.kind).toBe('server');
    expect(e.retryAfterMs).toBe(120_000);
    expect(e.message).toBe('token endpoint answered 429 (retry after 120 s)');
  });

  it("Retry-After counts from when the answer was made, as the quota guard's (one parser)", () => {
    const e = checkError(
      answer(null, { status: 503, headers: { 'retry-after': '60', age: '50' } }),
    );
    expect(e.retryAfterMs).toBe(10_000);
  });

  it('a delta-seconds Retry-After is not shortened by an answer Date far behind the clock', () => {
    // The clock reads 0; the answer says it was made 60 s earlier (its clock is a minute slow).
    const date = new Date(-60_000).toUTCString();
    const e = checkError(answer(null, { status: 503, headers: { 'retry-after': '2', date } }));
    expect(e.retryAfterMs).toBe(2_000);
    expect(e.message).toBe('token endpoint answered 503 (retry after 2 s)');
  });

  it('an error status with a body over the cap still reports the status', () => {
    const e = checkError(tokenAnswer(503, {}, '', true));
    expect(e.kind).toBe('server');
    expect(e.message).toBe('token endpoint answered 503');
  });
});

/** A fresh MockAgent per test that refuses real connections; closed after each test. */
function useMockAgent(): { agent: MockAgent } {
  const holder = {} as { agent: MockAgent };
  beforeEach(() => {
    holder.agent = new MockAgent();
    holder.agent.disableNetConnect();
  });
  afterEach(async () => {
    await holder.agent.close();
  });
  return holder;
}

/** The deadline `requestToken` would make; long enough never to fire in these tests. */
const deadline = () => AbortSignal.timeout(10_000);

describe('sendGrantRequest (MockAgent)', () => {
  const origin = 'https://auth.example';
  const mock = useMockAgent();

  function options(overrides: Partial<TokenClientOptions> = {}): TokenClientOptions {
    return {
      url: `${origin}/oauth/token/`,
      format: 'json',
      clientAuth: 'body',
      scopes: [],
      timeoutMs: 2000,
      dispatcher: mock.agent,
      ...overrides,
    };
  }

  /** The next grant POST to the mock token endpoint (answer it with `.reply(...)`). */
  function nextGrant() {
    return mock.agent.get(origin).intercept({ path: '/oauth/token/', method: 'POST' });
  }

  /** Answers 201 once and records what arrived. */
  function capture(): { headers: Record<string, string>; body: string } {
    const seen = { headers: {} as Record<string, string>, body: '' };
    nextGrant().reply((opts) => {
      seen.headers = opts.headers as Record<string, string>;
      seen.body = opts.body as string;
      return {
        statusCode: 201,
        data: JSON.stringify({ accessToken: ACCESS, tokenType: 'Bearer', expiresIn: 1799 }),
      };
    });
    return seen;
  }

  const cc: GrantRequest = {
    grant: 'client_credentials',
    credentials: { clientId: 'demo-client', clientSecret: CLIENT_SECRET },
  };
  const refresh: GrantRequest = { grant: 'refresh_token', refreshToken: REFRESH };
  const basic = `Basic ${Buffer.from(`demo-client:${CLIENT_SECRET}`).toString('base64')}`;

  const cases: [
    TokenClientOptions['format'],
    TokenClientOptions['clientAuth'],
    GrantRequest,
    string[],
    string,
    string | undefined,
  ][] = [
    [
      'json',
      'body',
      cc,
      [],
      `{"grantType":"clientCredentials","clientId":"demo-client","clientSecret":"${CLIENT_SECRET}"}`,
      undefined,
    ],
    [
      'json',
      'body',
      cc,
      ['read', 'write'],
      `{"grantType":"clientCredentials","clientId":"demo-client","clientSecret":"${CLIENT_SECRET}","scopes":"read,write"}`,
      undefined,
    ],
    ['json', 'basic', cc, [], '{"grantType":"clientCredentials"}', basic],
    [
      'json',
      'basic',
      cc,
      ['read', 'write'],
      '{"grantType":"clientCredentials","scopes":"read,write"}',
      basic,
    ],
    [
      'json',
      'body',
      refresh,
      ['read'],
      `{"grantType":"refreshToken","refreshToken":"${REFRESH}"}`,
      undefined,
    ],
    [
      'json',
      'basic',
      refresh,
      [],
      `{"grantType":"refreshToken","refreshToken":"${REFRESH}"}`,
      undefined,
    ],
    [
      'form',
      'body',
      cc,
      [],
      `grant_type=client_credentials&client_id=demo-client&client_secret=${CLIENT_SECRET}`,
      undefined,
    ],
    [
      'form',
      'body',
      cc,
      ['read', 'write'],
      `grant_type=client_credentials&client_id=demo-client&client_secret=${CLIENT_SECRET}&scope=read+write`,
      undefined,
    ],
    ['form', 'basic', cc, [], 'grant_type=client_credentials', basic],
    [
      'form',
      'basic',
      cc,
      ['read', 'write'],
      'grant_type=client_credentials&scope=read+write',
      basic,
    ],
    [
      'form',
      'body',
      refresh,
      ['read'],
      `grant_type=refresh_token&refresh_token=${REFRESH}`,
      undefined,
    ],
    ['form', 'basic', refresh, [], `grant_type=refresh_token&refresh_token=${REFRESH}`, undefined],
  ];

  it.each(cases)(
    '%s / %s / %o / scopes %j',
    async (format, clientAuth, request, scopes, body, authorization) => {
      const seen = capture();
      const res = await sendGrantRequest(
        options({ format, clientAuth, scopes }),
        request,
        deadline(),
      );
      expect(res.status).toBe(201);
      expect(seen.body).toBe(body);
      expect(seen.headers.accept).toBe('application/json');
      expect(seen.headers['user-agent']).toBe(USER_AGENT);
      expect(seen.headers['content-type']).toBe(
        format === 'json' ? 'application/json' : 'application/x-www-form-urlencoded',
      );
      expect(seen.headers.authorization).toBe(authorization);
      expect(checkTokenResponse(res).accessToken).toBe(ACCESS);
    },
  );

  it('does not follow a redirect', async () => {
    const pool = mock.agent.get(origin);
    pool
      .intercept({ path: '/oauth/token/', method: 'POST' })
      .reply(302, '', { headers: { location: `${origin}/elsewhere/` } });
    // Were the redirect followed, this would be the answer.
    pool
      .intercept({ path: '/elsewhere/', method: 'POST' })
      .reply(201, { accessToken: ACCESS, tokenType: 'Bearer' })
      .persist();
    const res = await sendGrantRequest(options(), cc, deadline());
    expect(res.status).toBe(302);
    const e = checkError(res);
    expect(e.kind).toBe('redirect');
    expect(e.message).toContain(`redirect to ${origin}/elsewhere/`);
  });

  it('accepts an answer of exactly MAX_ANSWER_BYTES (64 KiB)', async () => {
    const body = JSON.stringify({ accessToken: ACCESS, tokenType: 'Bearer' });
    const padded = body + ' '.repeat(MAX_ANSWER_BYTES - body.length);
    nextGrant().reply(201, padded, { headers: { 'content-type': 'application/json' } });
    const res = await sendGrantRequest(options(), cc, deadline());
    expect(res.tooLarge).toBe(false);
    expect(checkTokenResponse(res).accessToken).toBe(ACCESS);
  });

  it('one byte more is malformed', async () => {
    nextGrant().reply(201, ' '.repeat(MAX_ANSWER_BYTES + 1));
    const res = await sendGrantRequest(options(), cc, deadline());
    expect(res.tooLarge).toBe(true);
    expect(res.text).toBe('');
    const e = checkError(res);
    expect(e.kind).toBe('malformed');
    expect(e.message).toBe('token endpoint answer larger than 65536 bytes');
  });

  it('503 with an oversized body still reports the status', async () => {
    nextGrant().reply(503, 'x'.repeat(100_000), { headers: { 'retry-after': '7' } });
    const e = checkError(await sendGrantRequest(options(), cc, deadline()));
    expect(e.kind).toBe('server');
    expect(e.message).toBe('token endpoint answered 503 (retry after 7 s)');
  });

  it('reads repeated headers as one list', async () => {
    nextGrant().reply(400, '', { headers: { 'x-twice': ['a', 'b'] } });
    const res = await sendGrantRequest(options(), cc, deadline());
    expect(res.header('x-twice')).toBe('a, b');
    expect(res.header('x-absent')).toBeNull();
  });

  it('maps a connection failure to network', async () => {
    nextGrant().replyWithError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    const e: unknown = await sendGrantRequest(options(), cc, deadline()).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TokenEndpointError);
    expect((e as TokenEndpointError).kind).toBe('network');
    expect((e as TokenEndpointError).message).toBe(
      `token endpoint ${origin}/oauth/token/ unreachable: ECONNRESET socket hang up`,
    );
  });

  it('times out after timeoutMs', async () => {
    nextGrant().reply(201, { accessToken: ACCESS, tokenType: 'Bearer' }).delay(1000);
    const e: unknown = await sendGrantRequest(
      options({ timeoutMs: 50 }),
      cc,
      AbortSignal.timeout(50),
    ).catch((x: unknown) => x);
    expect((e as TokenEndpointError).kind).toBe('timeout');
    expect((e as TokenEndpointError).message).toBe(
      `token endpoint ${origin}/oauth/token/ timed out after 50 ms`,
    );
  });

  it('honours a caller abort', async () => {
    nextGrant().reply(201, {}).delay(1000);
    const controller = new AbortController();
    const pending = sendGrantRequest(options(), cc, controller.signal).catch((x: unknown) => x);
    controller.abort();
    const e = (await pending) as TokenEndpointError;
    expect(e.kind).toBe('timeout');
    expect(e.message).toBe(`token endpoint ${origin}/oauth/token/ request aborted`);
  });

  it('never names user-info or query of the configured URL', async () => {
    const e: unknown = await sendGrantRequest(
      options({ url: `https://unmocked.example/oauth/token/?secret=${CLIENT_SECRET}` }),
      cc,
      deadline(),
    ).catch((x: unknown) => x);
    expect((e as TokenEndpointError).kind).toBe('network');
    expect((e as TokenEndpointError).message).toContain(
      'token endpoint https://unmocked.example/oauth/token/ unreachable',
    );
    expect((e as TokenEndpointError).message).not.toContain(CLIENT_SECRET);
  });
});

describe('createTokenEndpointClient (MockAgent)', () => {
  const origin = 'https://auth.example';
  const mock = useMockAgent();

  const client = (timeoutMs = 2000) =>
    createTokenEndpointClient({
      url: `${origin}/oauth/token/`,
      format: 'form',
      clientAuth: 'basic',
      scopes: [],
      timeoutMs,
      dispatcher: mock.agent,
    });

  it('sends and checks', async () => {
    mock.agent.get(origin).intercept({ path: '/oauth/token/', method: 'POST' }).reply(201, {
      access_token: ACCESS,
      token_type: 'bearer',
      expires_in: 1799,
      refresh_token: null,
    });
    const set = await client().requestToken({ grant: 'refresh_token', refreshToken: REFRESH });
    expect(set).toEqual({
      accessToken: ACCESS,
      tokenType: 'bearer',
      expiresInSeconds: 1799,
      lifetimeDefaulted: false,
      refreshToken: null,
    });
  });

  it('passes a rejection through', async () => {
    mock.agent
      .get(origin)
      .intercept({ path: '/oauth/token/', method: 'POST' })
      .reply(400, { error: 'invalid_grant' });
    const e: unknown = await client()
      .requestToken({ grant: 'refresh_token', refreshToken: REFRESH })
      .catch((x: unknown) => x);
    expect((e as TokenEndpointError).kind).toBe('rejected');
    expect((e as TokenEndpointError).message).toBe('token endpoint answered 400 invalid_grant');
  });
});

describe('the answer body from a local HTTP server', () => {
  let server: Server;
  let url: string;
  /** What the server does with each request; set by each test. */
  let handle: (req: IncomingMessage, res: ServerResponse) => void;
  const dispatcher = new Agent();

  beforeEach(async () => {
    server = createServer((req, res) => handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth/token/`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const client = (timeoutMs = 2_000) =>
    createTokenEndpointClient({
      url,
      format: 'json',
      clientAuth: 'body',
      scopes: [],
      timeoutMs,
      dispatcher,
    });
  const requestToken = (timeoutMs?: number): Promise<unknown> =>
    client(timeoutMs)
      .requestToken({ grant: 'refresh_token', refreshToken: REFRESH })
      .catch((x: unknown) => x);

  it('bounds the body read by the same timeout', async () => {
    // Headers and the start of a body, then silence: only the body read can time out.
    handle = (_req, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.write('{"access_token":');
    };
    const e = await requestToken(150);
    expect((e as TokenEndpointError).kind).toBe('timeout');
    expect((e as TokenEndpointError).message).toBe(`token endpoint ${url} timed out after 150 ms`);
  });

  it('stops reading a body streamed without a content-length past 64 KiB', async () => {
    let written = 0;
    let closed = false;
    // An endless body, written as fast as the connection takes it.
    handle = (_req, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.on('close', () => (closed = true));
      const chunk = Buffer.alloc(16384, 32);
      const pump = (): void => {
        while (!closed && res.write(chunk)) written += chunk.length;
        if (!closed) res.once('drain', pump);
      };
      pump();
    };
    const e = await requestToken();
    expect((e as TokenEndpointError).kind).toBe('malformed');
    expect((e as TokenEndpointError).status).toBe(201);
    expect((e as TokenEndpointError).message).toBe('token endpoint answer larger than 65536 bytes');
    // The client dropped the connection: the server's writes end (socket buffers aside).
    await waitFor(() => closed, 5_000, 'the server to see the connection closed');
    expect(written).toBeLessThan(16 * 1024 * 1024);
  });

  it('refuses a declared content-length above the cap without reading the body', async () => {
    // Declares 1 MB, sends a little and stalls: only the declared length can end this early.
    handle = (_req, res) => {
      res.writeHead(201, { 'content-length': '1000000' });
      res.write('{}');
    };
    const e = await requestToken();
    expect((e as TokenEndpointError).kind).toBe('malformed');
    expect((e as TokenEndpointError).message).toBe('token endpoint answer larger than 65536 bytes');
  });

  it('reports a body cut off by a reset as a network error', async () => {
    handle = (_req, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.write('{"accessToken":', () => res.destroy());
    };
    const e = await requestToken();
    expect((e as TokenEndpointError).kind).toBe('network');
    expect((e as TokenEndpointError).status).toBe(201);
    expect((e as TokenEndpointError).message).toMatch(
      /^token endpoint answer: connection failed while reading the body: .*other side closed/,
    );
  });
});
