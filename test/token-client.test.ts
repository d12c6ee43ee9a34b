/**
 * The token endpoint client against the real stand-in over HTTPS, TLS verification on: both
 * request formats × both credential placements, and every fault the stand-in can inject.
 */
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClientAuth, TokenFormat } from '../src/config/types.js';
import { TokenEndpointError, type TokenErrorKind } from '../src/errors.js';
import type { Standin, TokenFault } from '../src/standin/index.js';
import { createTestPki, startStandin } from '../src/standin/index.js';
import { createTokenEndpointClient } from '../src/token/client.js';
import type { GrantRequest, TokenEndpoint } from '../src/token/types.js';

const CLIENT_ID = 'it-client';
const CLIENT_SECRET = 'it-SECRET-0123456789';
const credentials = { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET };
const cc: GrantRequest = { grant: 'client_credentials', credentials };

let standin: Standin;
let standin200: Standin;
let dispatcher: Agent;

beforeAll(async () => {
  const pki = await createTestPki();
  standin = await startStandin({ pki, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
  standin200 = await startStandin({
    pki,
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    tokenStatus: 200,
  });
  dispatcher = new Agent({ connect: { ca: pki.caCert } });
});

afterAll(async () => {
  await dispatcher.close();
  await standin.close();
  await standin200.close();
});

function client(
  format: TokenFormat = 'json',
  clientAuth: ClientAuth = 'body',
  overrides: { timeoutMs?: number; scopes?: string[]; url?: string } = {},
): TokenEndpoint {
  return createTokenEndpointClient({
    url: overrides.url ?? `${standin.url}/oauth/token/`,
    format,
    clientAuth,
    scopes: overrides.scopes ?? [],
    timeoutMs: overrides.timeoutMs ?? 5000,
    dispatcher,
  });
}

/** No secret or issued token in the message, the cause's message or the serialised error. */
function expectNoSecrets(error: TokenEndpointError): void {
  const texts = [
    error.message,
    JSON.stringify(error),
    error.cause instanceof Error ? error.cause.message : '',
  ];
  for (const secret of [CLIENT_SECRET, ...standin.issuedTokens(), ...standin200.issuedTokens()]) {
    for (const text of texts) expect(text).not.toContain(secret);
  }
}

async function failure(endpoint: TokenEndpoint, request: GrantRequest = cc) {
  const error: unknown = await endpoint.requestToken(request).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TokenEndpointError);
  expectNoSecrets(error as TokenEndpointError);
  return error as TokenEndpointError;
}

describe('token client against the stand-in', () => {
  const combinations: [TokenFormat, ClientAuth][] = [
    ['json', 'body'],
    ['json', 'basic'],
    ['form', 'body'],
    ['form', 'basic'],
  ];

  it.each(combinations)('%s / %s: client credentials, then refresh', async (format, clientAuth) => {
    const endpoint = client(format, clientAuth, { scopes: ['read', 'write'] });
    const first = await endpoint.requestToken(cc);
    expect(first.tokenType).toBe('bearer');
    expect(first.expiresInSeconds).toBe(1799);
    expect(first.lifetimeDefaulted).toBe(false);
    expect(standin.issuedTokens()).toContain(first.accessToken);
    expect(typeof first.refreshToken).toBe('string');

    const sent = standin.tokenRequests.at(-1)!;
    expect(sent).toMatchObject({
      format,
      grant: 'client_credentials',
      auth: clientAuth,
      clientId: CLIENT_ID,
      secretOk: true,
      scopes: format === 'json' ? 'read,write' : 'read write',
      outcome: 'issued',
      status: 201,
    });

    const second = await endpoint.requestToken({
      grant: 'refresh_token',
      refreshToken: first.refreshToken!,
    });
    expect(second.accessToken).not.toBe(first.accessToken);
    expect(standin.tokenRequests.at(-1)).toMatchObject({
      format,
      grant: 'refresh_token',
      auth: 'none',
      outcome: 'issued',
    });
  });

  it('accepts 200 as well as 201', async () => {
    const endpoint = client('form', 'basic', { url: `${standin200.url}/oauth/token/` });
    const set = await endpoint.requestToken(cc);
    expect(standin200.tokenRequests.at(-1)?.status).toBe(200);
    expect(set.accessToken.length).toBeGreaterThan(0);
  });

  it('passes null and absent refresh tokens through', async () => {
    standin.nullRefreshTokenNext(1);
    expect((await client().requestToken(cc)).refreshToken).toBeNull();
    standin.omitRefreshTokenNext(1);
    expect((await client().requestToken(cc)).refreshToken).toBeUndefined();
  });

  it.each(combinations)('%s / %s: a wrong secret is rejected', async (format, clientAuth) => {
    const e = await failure(client(format, clientAuth), {
      grant: 'client_credentials',
      credentials: { clientId: CLIENT_ID, clientSecret: 'wrong-SECRET' },
    });
    expect(e.kind).toBe('rejected');
    expect(e.status).toBe(401);
    expect(e.oauthError).toBe('invalid_client');
    expect(e.message).toMatch(/^token endpoint answered 401 invalid_client: /);
    expect(e.message).not.toContain('wrong-SECRET');
  });

  it('a used refresh token is rejected with invalid_grant', async () => {
    const set = await client('form').requestToken(cc);
    const refresh: GrantRequest = { grant: 'refresh_token', refreshToken: set.refreshToken! };
    await client('form').requestToken(refresh);
    const e = await failure(client('form'), refresh);
    expect(e.kind).toBe('rejected');
    expect(e.oauthError).toBe('invalid_grant');
    expect(e.message).toContain('token endpoint answered 400 invalid_grant');
  });
});

describe('token client against stand-in faults', () => {
  const faults: [string, TokenFault, TokenErrorKind, string | RegExp][] = [
    [
      'html',
      { kind: 'html' },
      'malformed',
      /^token endpoint answer is not JSON \(content-type text\/html; charset=utf-8, \d+ bytes\)$/,
    ],
    [
      'missing access token',
      { kind: 'missing-access-token' },
      'malformed',
      'token endpoint answer: "accessToken" (or "access_token") is missing',
    ],
    [
      'token type mac',
      { kind: 'token-type', tokenType: 'mac' },
      'malformed',
      'token endpoint answer: "tokenType" must be "Bearer" (got "mac")',
    ],
    [
      'negative expiresIn',
      { kind: 'expires-in', value: -5 },
      'malformed',
      'token endpoint answer: "expiresIn" must be a non-negative integer (got -5)',
    ],
    [
      'non-numeric expiresIn',
      { kind: 'expires-in', value: 'abc' },
      'malformed',
      'token endpoint answer: "expiresIn" must be a non-negative integer (got "abc")',
    ],
    [
      '1 MB body',
      { kind: 'huge', bytes: 1_000_000 },
      'malformed',
      'token endpoint answer larger than 65536 bytes',
    ],
    [
      'redirect',
      { kind: 'redirect', location: 'https://login.example/sso?next=/oauth/token/' },
      'redirect',
      'token endpoint answered 302 redirect to https://login.example/sso; redirects are not followed',
    ],
    [
      '500 with Retry-After',
      { kind: 'status', status: 500, retryAfter: '7' },
      'server',
      'token endpoint answered 500 injected_fault: stand-in fault 500 (retry after 7 s)',
    ],
    [
      '503 with an HTML body',
      { kind: 'status', status: 503, body: '<h1>down</h1>', contentType: 'text/html' },
      'server',
      'token endpoint answered 503 (content-type text/html, 13 bytes)',
    ],
    [
      'reset',
      { kind: 'reset' },
      'network',
      /^token endpoint https:\/\/127\.0\.0\.1:\d+\/oauth\/token\/ unreachable: /,
    ],
  ];

  it.each(faults)('%s', async (_name, fault, kind, message) => {
    standin.failTokenRequests(fault, 1);
    const e = await failure(client());
    expect(e.kind).toBe(kind);
    if (typeof message === 'string') expect(e.message).toBe(message);
    else expect(e.message).toMatch(message);
    // Delta-seconds count from arrival, whatever the answer's Date (http-fields/retry-after.ts).
    if (fault.kind === 'status' && fault.retryAfter !== undefined) {
      expect(e.retryAfterMs).toBe(7000);
    }
    // The client recovers on the next request.
    expect((await client().requestToken(cc)).tokenType).toBe('bearer');
  });

  it('missing expiresIn falls back to the default lifetime', async () => {
    standin.failTokenRequests({ kind: 'expires-in', omit: true }, 1);
    const set = await client('form').requestToken(cc);
    expect(set.lifetimeDefaulted).toBe(true);
    expect(set.expiresInSeconds).toBe(300);
  });

  it('hang → timeout after timeoutMs', async () => {
    standin.failTokenRequests({ kind: 'hang' }, 1);
    const e = await failure(client('json', 'basic', { timeoutMs: 300 }));
    expect(e.kind).toBe('timeout');
    expect(e.message).toBe(`token endpoint ${standin.url}/oauth/token/ timed out after 300 ms`);
  });

  it('a slow answer beyond timeoutMs → timeout', async () => {
    standin.failTokenRequests({ kind: 'delay', ms: 1000 }, 1);
    const e = await failure(client('form', 'body', { timeoutMs: 200 }));
    expect(e.kind).toBe('timeout');
  });

  it('an untrusted certificate → network, naming the TLS problem', async () => {
    const other = new Agent();
    try {
      const e = await failure(
        createTokenEndpointClient({
          url: `${standin.url}/oauth/token/`,
          format: 'json',
          clientAuth: 'body',
          scopes: [],
          timeoutMs: 5000,
          dispatcher: other,
        }),
      );
      expect(e.kind).toBe('network');
      expect(e.message).toMatch(/certificate/i);
    } finally {
      await other.close();
    }
  });
});
