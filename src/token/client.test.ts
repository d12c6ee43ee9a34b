import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, MockAgent, Response } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TokenEndpointError, isRejectedGrant } from '../errors.js';
import {
  DEFAULT_LIFETIME_SECONDS,
  MAX_ANSWER_BYTES,
  checkTokenResponse,
  createTokenEndpointClient,
  parseRetryAfter,
  sendGrantRequest,
  type TokenClientOptions,
} from './client.js';
import type { GrantRequest } from './types.js';

const ACCESS = 'at-SECRET-ACCESS-TOKEN';
const REFRESH = 'rt-SECRET-REFRESH-TOKEN';
const CLIENT_SECRET = 'demo-SECRET';

function json(body: unknown, status = 201, headers: Record<string, string> = {}): Response {
  return new Response(typeof body === 'string' ? body : JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

async function checkError(response: Response): Promise<TokenEndpointError> {
  const error: unknown = await checkTokenResponse(response, { now: () => 0 }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TokenEndpointError);
  const e = error as TokenEndpointError;
  for (const secret of [ACCESS, REFRESH, CLIENT_SECRET]) {
    expect(e.message).not.toContain(secret);
    expect(JSON.stringify(e)).not.toContain(secret);
  }
  return e;
}

describe('checkTokenResponse: success', () => {
  it('accepts the camelCase answer with 201', async () => {
    const set = await checkTokenResponse(
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

  it.each([200, 201, 203])('accepts snake_case with %i, token type in any case', async (status) => {
    const set = await checkTokenResponse(
      json({ access_token: ACCESS, token_type: 'bEaReR', expires_in: 1800 }, status),
    );
    expect(set.accessToken).toBe(ACCESS);
    expect(set.tokenType).toBe('bearer');
    expect(set.expiresInSeconds).toBe(1800);
    expect(set.refreshToken).toBeUndefined();
  });

  it('parses JSON whatever the content-type says', async () => {
    const res = new Response(JSON.stringify({ accessToken: ACCESS, tokenType: 'Bearer' }), {
      status: 201,
      headers: { 'content-type': 'text/plain' },
    });
    expect((await checkTokenResponse(res)).accessToken).toBe(ACCESS);
  });

  it('defaults a missing expiresIn', async () => {
    const set = await checkTokenResponse(json({ accessToken: ACCESS, tokenType: 'Bearer' }));
    expect(DEFAULT_LIFETIME_SECONDS).toBe(300);
    expect(set.expiresInSeconds).toBe(300);
    expect(set.lifetimeDefaulted).toBe(true);
  });

  it.each([
    [0, 0],
    ['1799', 1799],
    ['0', 0],
  ])('accepts expiresIn %j', async (value, seconds) => {
    const set = await checkTokenResponse(
      json({ accessToken: ACCESS, tokenType: 'Bearer', expiresIn: value }),
    );
    expect(set.expiresInSeconds).toBe(seconds);
    expect(set.lifetimeDefaulted).toBe(false);
  });

  it('maps a null refresh token to null and a string to itself', async () => {
    const base = { accessToken: ACCESS, tokenType: 'Bearer', expiresIn: 1 };
    expect((await checkTokenResponse(json({ ...base, refreshToken: null }))).refreshToken).toBe(
      null,
    );
    expect((await checkTokenResponse(json({ ...base, refresh_token: REFRESH }))).refreshToken).toBe(
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
  ])('%j → %s', async (body, message) => {
    const e = await checkError(json(body));
    expect(e.kind).toBe('malformed');
    expect(e.status).toBe(201);
    expect(e.message).toContain('token endpoint answer');
    expect(e.message).toContain(message);
  });

  it('accepts the largest lifetime and a b64token of 8 KiB with padding', async () => {
    const token = `${'A'.repeat(8190)}==`;
    const set = await checkTokenResponse(
      json({ ...good, accessToken: token, expiresIn: 2 ** 31 - 1 }),
    );
    expect(set).toMatchObject({ expiresInSeconds: 2 ** 31 - 1 });
    expect(set.accessToken).toBe(token);
  });

  it('refuses an access token over 8 KiB', async () => {
    const e = await checkError(json({ ...good, accessToken: 'a'.repeat(8193) }));
    expect(e.kind).toBe('malformed');
    expect(e.message).toContain('"accessToken" must be an RFC 6750 b64token');
    expect(e.message).toContain('of at most 8192 characters (got 8193 characters)');
  });

  it('never shows a refused access token in the message', async () => {
    const e = await checkError(json({ ...good, accessToken: `${ACCESS}\r\n` }));
    expect(e.kind).toBe('malformed');
    expect(e.message).not.toContain(ACCESS);
    expect(e.message).toContain('"accessToken"');
  });

  it('names content-type and length of a non-JSON body, never its content', async () => {
    const html = `<html>${ACCESS}</html>`;
    const e = await checkError(
      new Response(html, { status: 200, headers: { 'content-type': 'text/html' } }),
    );
    expect(e.kind).toBe('malformed');
    expect(e.message).toBe(
      `token endpoint answer is not JSON (content-type text/html, ${html.length} bytes)`,
    );
    expect((e as unknown as { body: string }).body).toBe(html);
    expect(Object.keys(e)).not.toContain('body');
  });

  it('caps the body at 64 KiB, streamed without a content-length', async () => {
    let pulled = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += 1;
        controller.enqueue(new Uint8Array(16384).fill(32));
        if (pulled > 1000) controller.close();
      },
    });
    const e = await checkError(new Response(stream, { status: 201 }));
    expect(e.kind).toBe('malformed');
    expect(e.message).toBe('token endpoint answer larger than 65536 bytes');
    expect(pulled).toBeLessThan(10);
  });

  it('accepts exactly 64 KiB', async () => {
    const body = JSON.stringify({ accessToken: ACCESS, tokenType: 'Bearer' });
    const padded = body + ' '.repeat(MAX_ANSWER_BYTES - body.length);
    const set = await checkTokenResponse(new Response(padded, { status: 201 }));
    expect(set.accessToken).toBe(ACCESS);
  });

  it('refuses a declared content-length above the cap without reading', async () => {
    const e = await checkError(
      new Response('{}', { status: 201, headers: { 'content-length': '1000000' } }),
    );
    expect(e.message).toBe('token endpoint answer larger than 65536 bytes');
  });

  it('reports a body cut off by a reset as a network error', async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"accessToken":'));
        controller.error(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }));
      },
    });
    const e = await checkError(new Response(stream, { status: 201 }));
    expect(e.kind).toBe('network');
    expect(e.message).toContain('other side closed');
  });
});

describe('checkTokenResponse: error statuses', () => {
  it('3xx is a redirect naming the Location without its query', async () => {
    const e = await checkError(
      new Response(null, {
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

  it('names a relative Location', async () => {
    const e = await checkError(
      new Response(null, { status: 307, headers: { location: '/other/' } }),
    );
    expect(e.message).toContain('redirect to /other/');
  });

  it('401 with an OAuth error body is rejected', async () => {
    const e = await checkError(
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

  it("400 with the API's errors envelope is rejected", async () => {
    const e = await checkError(
      json({ errors: [{ code: 'invalid_grant', detail: 'refresh token expired' }] }, 400),
    );
    expect(e.kind).toBe('rejected');
    expect(e.oauthError).toBe('invalid_grant');
    expect(e.message).toBe('token endpoint answered 400 invalid_grant: refresh token expired');
  });

  it('strips control characters and caps the description', async () => {
    const e = await checkError(
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

  it('a 403 without a JSON body names only content-type and length', async () => {
    const e = await checkError(
      new Response('forbidden', { status: 403, headers: { 'content-type': 'text/plain' } }),
    );
    expect(e.kind).toBe('rejected');
    expect(e.oauthError).toBeUndefined();
    expect(e.message).toBe('token endpoint answered 403 (content-type text/plain, 9 bytes)');
  });

  it('500 is a server error with Retry-After in seconds', async () => {
    const e = await checkError(
      new Response('oops', { status: 500, headers: { 'retry-after': '30' } }),
    );
    expect(e.kind).toBe('server');
    expect(isRejectedGrant(e)).toBe(false);
    expect(e.retryAfterMs).toBe(30_000);
    expect(e.message).toContain('token endpoint answered 500');
    expect(e.message).toContain('retry after 30 s');
  });

  it('429 is a server error with an HTTP-date Retry-After', async () => {
    const at = new Date(120_000).toUTCString();
    const e = await checkError(new Response(null, { status: 429, headers: { 'retry-after': at } }));
    expect(e.kind).toBe('server');
    expect(e.retryAfterMs).toBe(120_000);
    expect(e.message).toBe('token endpoint answered 429 (retry after 120 s)');
  });

  it('503 with an oversized body still reports the status', async () => {
    const e = await checkError(new Response('x'.repeat(100_000), { status: 503 }));
    expect(e.kind).toBe('server');
    expect(e.message).toBe('token endpoint answered 503');
  });
});

describe('parseRetryAfter', () => {
  it('reads delta-seconds and HTTP-dates, never negative', () => {
    expect(parseRetryAfter(null, 0)).toBeUndefined();
    expect(parseRetryAfter(' 5 ', 0)).toBe(5000);
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
    expect(parseRetryAfter('-3', 0)).toBeUndefined();
    expect(parseRetryAfter('Thu, 01 Jan 1970 00:00:10 GMT', 4000)).toBe(6000);
    expect(parseRetryAfter('Thu, 01 Jan 1970 00:00:10 GMT', 20_000)).toBe(0);
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

  /** Answers 201 once and records what arrived. */
  function capture(): { headers: Record<string, string>; body: string } {
    const seen = { headers: {} as Record<string, string>, body: '' };
    mock.agent
      .get(origin)
      .intercept({ path: '/oauth/token/', method: 'POST' })
      .reply((opts) => {
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
      expect(seen.headers['content-type']).toBe(
        format === 'json' ? 'application/json' : 'application/x-www-form-urlencoded',
      );
      expect(seen.headers.authorization).toBe(authorization);
      expect((await checkTokenResponse(res)).accessToken).toBe(ACCESS);
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
    const e = await checkError(res);
    expect(e.kind).toBe('redirect');
    expect(e.message).toContain(`redirect to ${origin}/elsewhere/`);
  });

  it('maps a connection failure to network', async () => {
    mock.agent
      .get(origin)
      .intercept({ path: '/oauth/token/', method: 'POST' })
      .replyWithError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    const e: unknown = await sendGrantRequest(options(), cc, deadline()).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TokenEndpointError);
    expect((e as TokenEndpointError).kind).toBe('network');
    expect((e as TokenEndpointError).message).toBe(
      `token endpoint ${origin}/oauth/token/ unreachable: ECONNRESET socket hang up`,
    );
  });

  it('times out after timeoutMs', async () => {
    mock.agent
      .get(origin)
      .intercept({ path: '/oauth/token/', method: 'POST' })
      .reply(201, { accessToken: ACCESS, tokenType: 'Bearer' })
      .delay(1000);
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
    mock.agent
      .get(origin)
      .intercept({ path: '/oauth/token/', method: 'POST' })
      .reply(201, {})
      .delay(1000);
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

describe('createTokenEndpointClient (local HTTP server)', () => {
  let server: Server;
  let url: string;
  const dispatcher = new Agent();

  beforeEach(async () => {
    // Headers and the start of a body, then silence: only the body read can time out.
    server = createServer((_req, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.write('{"access_token":');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth/token/`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('bounds the body read by the same timeout', async () => {
    const client = createTokenEndpointClient({
      url,
      format: 'json',
      clientAuth: 'body',
      scopes: [],
      timeoutMs: 150,
      dispatcher,
    });
    const e: unknown = await client
      .requestToken({ grant: 'refresh_token', refreshToken: REFRESH })
      .catch((x: unknown) => x);
    expect((e as TokenEndpointError).kind).toBe('timeout');
    expect((e as TokenEndpointError).message).toBe(`token endpoint ${url} timed out after 150 ms`);
  });
});
