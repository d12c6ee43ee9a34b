import { createHash, X509Certificate } from 'node:crypto';
import { connect, type ClientHttp2Session } from 'node:http2';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, startStandin, type Standin, type TestPki } from '../src/standin/index.js';
import { realClock } from './helpers/wait.js';

/** The stand-in records a request only once it answers: a hung one is seen by no counter. */
const inFlight = realClock(
  'requests the stand-in never answers must reach its sockets before it closes',
);

let pki: TestPki;
let standin: Standin;
let agent: Agent;

beforeAll(async () => {
  pki = await createTestPki();
  standin = await startStandin({ pki });
  agent = new Agent({ connect: { ca: pki.caCert } });
});

afterAll(async () => {
  await agent.destroy();
  await standin.close();
});

const basic = (id: string, secret: string): string =>
  `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

async function post(
  s: Standin,
  body: string,
  contentType: string,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
) {
  const res = await request(`${s.url}/oauth/token/`, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': contentType, accept: 'application/json', ...headers },
    body,
    signal,
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
}

const postJson = (s: Standin, body: object, headers?: Record<string, string>) =>
  post(s, JSON.stringify(body), 'application/json', headers);
const postForm = (s: Standin, body: Record<string, string>, headers?: Record<string, string>) =>
  post(s, new URLSearchParams(body).toString(), 'application/x-www-form-urlencoded', headers);

const clientCredentials = {
  grantType: 'clientCredentials',
  clientId: 'demo-client',
  clientSecret: 'demo-secret',
};

async function accessToken(s: Standin = standin): Promise<string> {
  const res = await postJson(s, clientCredentials);
  expect(res.status).toBe(201);
  return (JSON.parse(res.text) as { accessToken: string }).accessToken;
}

async function api(
  path: string,
  options: {
    token?: string;
    method?: 'GET' | 'POST';
    body?: string;
    headers?: Record<string, string>;
  } = {},
  s: Standin = standin,
) {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  return request(`${s.url}${path}`, {
    method: options.method ?? 'GET',
    dispatcher: agent,
    headers,
    body: options.body,
  });
}

describe('test PKI', () => {
  it('is a CA and a server certificate it signed for localhost, 127.0.0.1 and ::1', () => {
    const ca = new X509Certificate(pki.caCert);
    const leaf = new X509Certificate(pki.serverCert);
    expect(ca.ca).toBe(true);
    expect(leaf.ca).toBe(false);
    expect(leaf.checkIssued(ca)).toBe(true);
    expect(leaf.verify(ca.publicKey)).toBe(true);
    expect(leaf.subjectAltName).toContain('DNS:localhost');
    expect(leaf.subjectAltName).toContain('IP Address:127.0.0.1');
    expect(leaf.checkIP('::1')).toBe('::1');
    expect(leaf.publicKey.asymmetricKeyType).toBe('ec');
  });
});

describe('token endpoint', () => {
  it.each([
    ['json', 'body'],
    ['json', 'basic'],
    ['form', 'body'],
    ['form', 'basic'],
  ] as const)(
    'format %s with credentials in the %s answers 201 in the matching casing',
    async (format, auth) => {
      const before = standin.tokenRequests.length;
      const headers: Record<string, string> =
        auth === 'basic' ? { authorization: basic('demo-client', 'demo-secret') } : {};
      const res =
        format === 'json'
          ? await postJson(
              standin,
              auth === 'body'
                ? { ...clientCredentials, scopes: 'read' }
                : { grantType: 'clientCredentials', scopes: 'read' },
              headers,
            )
          : await postForm(
              standin,
              auth === 'body'
                ? {
                    grant_type: 'client_credentials',
                    client_id: 'demo-client',
                    client_secret: 'demo-secret',
                    scope: 'read',
                  }
                : { grant_type: 'client_credentials', scope: 'read' },
              headers,
            );
      expect(res.status).toBe(201);
      expect(res.headers['cache-control']).toBe('no-store');
      const body = JSON.parse(res.text) as Record<string, unknown>;
      // The same four fields in the format's own casing.
      const name =
        format === 'json'
          ? {
              access: 'accessToken',
              expires: 'expiresIn',
              refresh: 'refreshToken',
              type: 'tokenType',
            }
          : {
              access: 'access_token',
              expires: 'expires_in',
              refresh: 'refresh_token',
              type: 'token_type',
            };
      expect(Object.keys(body).sort()).toEqual(Object.values(name).sort());
      expect(body[name.type]).toBe('Bearer');
      expect(body[name.expires]).toBe(1799);
      expect(body[name.access]).toMatch(/^at_[\w-]{43}$/);
      expect(body[name.refresh]).toMatch(/^rt_[\w-]{43}$/);
      const recorded = standin.tokenRequests.slice(before);
      expect(recorded).toHaveLength(1);
      expect(recorded[0]).toMatchObject({
        format,
        grant: 'client_credentials',
        auth,
        clientId: 'demo-client',
        secretOk: true,
        scopes: 'read',
        outcome: 'issued',
        status: 201,
      });
      expect(JSON.stringify(standin.tokenRequests)).not.toContain('demo-secret');
    },
  );

  it('answers with tokenStatus 200 when configured so', async () => {
    const s = await startStandin({ pki, tokenStatus: 200, tokenLifetimeSeconds: 60 });
    try {
      const res = await postJson(s, clientCredentials);
      expect(res.status).toBe(200);
      expect(JSON.parse(res.text).expiresIn).toBe(60);
    } finally {
      await s.close();
    }
  });

  it('rejects a wrong or missing secret with 401 invalid_client, and follows a rotated secret', async () => {
    const wrong = await postJson(standin, { ...clientCredentials, clientSecret: 'nope' });
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.text)).toMatchObject({ error: 'invalid_client' });
    expect(standin.tokenRequests.at(-1)).toMatchObject({
      secretOk: false,
      outcome: 'rejected',
      status: 401,
    });

    const wrongBasic = await postForm(
      standin,
      { grant_type: 'client_credentials' },
      { authorization: basic('demo-client', 'nope') },
    );
    expect(wrongBasic.status).toBe(401);
    expect(wrongBasic.headers['www-authenticate']).toMatch(/^Basic/);

    const missing = await postForm(standin, { grant_type: 'client_credentials' });
    expect(missing.status).toBe(401);

    const s = await startStandin({ pki });
    try {
      s.setClientSecret('rotated');
      expect((await postJson(s, clientCredentials)).status).toBe(401);
      expect((await postJson(s, { ...clientCredentials, clientSecret: 'rotated' })).status).toBe(
        201,
      );
    } finally {
      await s.close();
    }
  });

  it('rotates refresh tokens: each is single use', async () => {
    const first = JSON.parse((await postJson(standin, clientCredentials)).text);
    const second = await postJson(standin, {
      grantType: 'refreshToken',
      refreshToken: first.refreshToken,
    });
    expect(second.status).toBe(201);
    const rotated = JSON.parse(second.text);
    expect(rotated.refreshToken).not.toBe(first.refreshToken);
    expect(standin.tokenRequests.at(-1)).toMatchObject({
      grant: 'refresh_token',
      auth: 'none',
      refreshToken: first.refreshToken,
      outcome: 'issued',
    });

    const reused = await postJson(standin, {
      grantType: 'refreshToken',
      refreshToken: first.refreshToken,
    });
    expect(reused.status).toBe(400);
    expect(JSON.parse(reused.text)).toMatchObject({ error: 'invalid_grant' });

    const form = await postForm(standin, {
      grant_type: 'refresh_token',
      refresh_token: rotated.refreshToken,
    });
    expect(form.status).toBe(201);
    expect(JSON.parse(form.text).refresh_token).toMatch(/^rt_/);
  });

  it('sends a null or no refresh token when told to', async () => {
    standin.nullRefreshTokenNext();
    const nulled = JSON.parse((await postJson(standin, clientCredentials)).text);
    expect(nulled).toHaveProperty('refreshToken', null);
    standin.omitRefreshTokenNext();
    const omitted = JSON.parse(
      (
        await postForm(standin, {
          grant_type: 'client_credentials',
          client_id: 'demo-client',
          client_secret: 'demo-secret',
        })
      ).text,
    );
    expect(omitted).not.toHaveProperty('refresh_token');
    expect(omitted.access_token).toMatch(/^at_/);
    const normal = JSON.parse((await postJson(standin, clientCredentials)).text);
    expect(normal.refreshToken).toMatch(/^rt_/);
  });

  it('rejects unknown grants, bad content types and unparsable bodies', async () => {
    const grant = await postJson(standin, { grantType: 'password' });
    expect(grant.status).toBe(400);
    expect(JSON.parse(grant.text)).toMatchObject({ error: 'unsupported_grant_type' });

    const snakeInJson = await postJson(standin, {
      grantType: 'client_credentials',
      clientId: 'demo-client',
      clientSecret: 'demo-secret',
    });
    expect(JSON.parse(snakeInJson.text)).toMatchObject({ error: 'unsupported_grant_type' });

    const type = await post(standin, 'grant_type=client_credentials', 'text/plain');
    expect(type.status).toBe(400);
    expect(JSON.parse(type.text).errors[0].code).toBe('invalid_request');
    expect(standin.tokenRequests.at(-1)).toMatchObject({ format: 'other', outcome: 'rejected' });

    const json = await post(standin, '{"grantType":', 'application/json');
    expect(json.status).toBe(400);
    expect(JSON.parse(json.text).errors[0].code).toBe('invalid_request');
  });

  it('accepts the path without the trailing slash', async () => {
    const res = await request(`${standin.url}/oauth/token`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(clientCredentials),
    });
    expect(res.statusCode).toBe(201);
    await res.body.dump();
  });
});

describe('token faults', () => {
  it('status, with body, content type and Retry-After; twice, then normal', async () => {
    standin.failTokenRequests(
      { kind: 'status', status: 503, body: 'down', contentType: 'text/plain', retryAfter: '7' },
      2,
    );
    for (let i = 0; i < 2; i += 1) {
      const res = await postJson(standin, clientCredentials);
      expect(res.status).toBe(503);
      expect(res.headers['retry-after']).toBe('7');
      expect(res.headers['content-type']).toBe('text/plain');
      expect(res.text).toBe('down');
      expect(standin.tokenRequests.at(-1)).toMatchObject({ outcome: 'fault', status: 503 });
    }
    expect((await postJson(standin, clientCredentials)).status).toBe(201);
  });

  it('reset, hang and delay', async () => {
    standin.failTokenRequests({ kind: 'reset' });
    await expect(postJson(standin, clientCredentials)).rejects.toThrow();
    expect(standin.tokenRequests.at(-1)).toMatchObject({ outcome: 'fault', status: undefined });

    standin.failTokenRequests({ kind: 'hang' });
    await expect(
      post(
        standin,
        JSON.stringify(clientCredentials),
        'application/json',
        {},
        AbortSignal.timeout(200),
      ),
    ).rejects.toThrow();

    standin.failTokenRequests({ kind: 'delay', ms: 30 });
    const delayed = await postJson(standin, clientCredentials);
    expect(delayed.status).toBe(201);
    expect(standin.tokenRequests.at(-1)).toMatchObject({ outcome: 'issued' });
  });

  it('html, redirect and huge answers', async () => {
    standin.failTokenRequests({ kind: 'html' });
    const html = await postJson(standin, clientCredentials);
    expect(html.status).toBe(200);
    expect(html.headers['content-type']).toMatch(/^text\/html/);

    standin.failTokenRequests({ kind: 'redirect', location: 'https://example.invalid/login' });
    const redirect = await postJson(standin, clientCredentials);
    expect(redirect.status).toBe(302);
    expect(redirect.headers.location).toBe('https://example.invalid/login');

    standin.failTokenRequests({ kind: 'huge', bytes: 300_000 });
    const huge = await postJson(standin, clientCredentials);
    expect(huge.status).toBe(201);
    expect(Buffer.byteLength(huge.text)).toBe(300_000);
    expect(huge.text.startsWith('{"accessToken":"aaa')).toBe(true);
    expect(huge.text.endsWith('"}')).toBe(true);
  });

  it('malformed token answers in the request casing', async () => {
    standin.failTokenRequests({ kind: 'missing-access-token' });
    expect(JSON.parse((await postJson(standin, clientCredentials)).text)).not.toHaveProperty(
      'accessToken',
    );

    standin.failTokenRequests({ kind: 'token-type', tokenType: 'mac' });
    const form = await postForm(standin, {
      grant_type: 'client_credentials',
      client_id: 'demo-client',
      client_secret: 'demo-secret',
    });
    expect(JSON.parse(form.text)).toMatchObject({ token_type: 'mac' });

    standin.failTokenRequests({ kind: 'expires-in', value: 'abc' });
    expect(JSON.parse((await postJson(standin, clientCredentials)).text).expiresIn).toBe('abc');

    standin.failTokenRequests({ kind: 'expires-in', omit: true });
    const omitted = JSON.parse((await postJson(standin, clientCredentials)).text);
    expect(omitted).not.toHaveProperty('expiresIn');
    // The tokens of a malformed answer still work, for clients that accept it.
    expect((await api('/v1.0/contracts/', { token: omitted.accessToken })).statusCode).toBe(200);
  });

  it('random faults, and clearing them', async () => {
    standin.failTokenRequestsRandomly({ kind: 'status', status: 500 }, 1);
    expect((await postJson(standin, clientCredentials)).status).toBe(500);
    standin.failTokenRequestsRandomly({ kind: 'status', status: 500 }, 0);
    expect((await postJson(standin, clientCredentials)).status).toBe(201);
    standin.failTokenRequests({ kind: 'status', status: 500 }, Infinity);
    standin.failTokenRequestsRandomly({ kind: 'html' }, 1);
    standin.clearTokenFaults();
    expect((await postJson(standin, clientCredentials)).status).toBe(201);
  });
});

describe('API routes', () => {
  it('contracts need a valid bearer; JSON by default, CSV on request', async () => {
    const without = await api('/v1.0/contracts/');
    expect(without.statusCode).toBe(401);
    expect(without.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    expect((await without.body.json()) as object).toMatchObject({
      errors: [{ code: 'unauthorized' }],
    });

    const forged = await api('/v1.0/contracts/', { token: 'at_forged' });
    expect(forged.statusCode).toBe(401);
    await forged.body.dump();

    const token = await accessToken();
    const json = await api('/v1.0/contracts/', { token, headers: { accept: 'application/json' } });
    expect(json.statusCode).toBe(200);
    const listing = (await json.body.json()) as { data: { shortName: string }[] };
    expect(listing.data.map((c) => c.shortName)).toContain('spark30s');

    const csv = await api('/v1.0/contracts/', { token, headers: { accept: 'text/csv' } });
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    const text = await csv.body.text();
    expect(text.split('\r\n')[0]).toBe('shortName,fullName,type');
    expect(text).toContain('spark30s,Spark30S Atlantic,freight');
    expect(standin.apiRequests.at(-1)).toMatchObject({ token, status: 200, httpVersion: '1.1' });
  });

  it('echo and /beta/ report and record headers and the body hash', async () => {
    const token = await accessToken();
    const body = 'x'.repeat(200_000);
    const sha = createHash('sha256').update(body).digest('hex');
    const res = await api('/v1.0/echo/a?b=1', {
      token,
      method: 'POST',
      body,
      headers: { 'x-test': 'hello', 'content-type': 'text/plain' },
    });
    const echo = (await res.body.json()) as Record<string, unknown>;
    expect(echo).toMatchObject({
      method: 'POST',
      url: '/v1.0/echo/a?b=1',
      bodyBytes: 200_000,
      bodySha256: sha,
    });
    expect((echo.headers as Record<string, string>)['x-test']).toBe('hello');
    const recorded = standin.apiRequests.at(-1)!;
    expect(recorded).toMatchObject({
      url: '/v1.0/echo/a?b=1',
      bodyBytes: 200_000,
      bodySha256: sha,
      status: 200,
    });
    expect(recorded.headers['x-test']).toBe('hello');

    const beta = await api('/beta/anything', { token, method: 'POST', body: 'hi' });
    expect(((await beta.body.json()) as { bodyBytes: number }).bodyBytes).toBe(2);
  });

  it('expired and revoked access tokens are refused; revoked refresh tokens too', async () => {
    const s = await startStandin({ pki, tokenLifetimeSeconds: 0 });
    try {
      const expired = await accessToken(s);
      expect((await api('/v1.0/contracts/', { token: expired }, s)).statusCode).toBe(401);
      s.setTokenLifetime(600);
      const res = JSON.parse((await postJson(s, clientCredentials)).text);
      expect((await api('/v1.0/contracts/', { token: res.accessToken }, s)).statusCode).toBe(200);
      s.revokeAccessTokens();
      expect((await api('/v1.0/contracts/', { token: res.accessToken }, s)).statusCode).toBe(401);
      s.revokeRefreshTokens();
      const refresh = await postJson(s, {
        grantType: 'refreshToken',
        refreshToken: res.refreshToken,
      });
      expect(refresh.status).toBe(400);
      expect(JSON.parse(refresh.text)).toMatchObject({ error: 'invalid_grant' });
      expect(s.issuedTokens()).toEqual(
        expect.arrayContaining([expired, res.accessToken, res.refreshToken]),
      );
    } finally {
      await s.close();
    }
  });

  it('bytes, slow, slow-body, hop, status, reset and 404', async () => {
    const token = await accessToken();

    const bytes = await api('/v1.0/bytes/1000000', { token });
    expect(bytes.headers['content-length']).toBe('1000000');
    const data = Buffer.from(await bytes.body.arrayBuffer());
    expect(data.length).toBe(1_000_000);
    expect(data[70_000]).toBe(70_000 & 0xff);

    const slow = await api('/v1.0/slow/20', { token });
    expect(await slow.body.json()).toEqual({ waitedMs: 20 });
    const slowBody = await api('/v1.0/slow-body/20', { token });
    expect(slowBody.statusCode).toBe(200);
    expect(await slowBody.body.json()).toEqual({ first: 'chunk', waitedMs: 20 });

    const hop = await api('/v1.0/hop', { token });
    expect(hop.headers.connection).toBe('X-Custom-Hop');
    expect(hop.headers['x-custom-hop']).toBe('1');
    expect(hop.headers['keep-alive']).toBe('timeout=5');
    expect(hop.headers['proxy-authenticate']).toBe('Basic');
    expect(hop.headers['x-kept']).toBe('yes');
    expect(hop.headers['set-cookie']).toHaveLength(2);
    await hop.body.dump();

    const teapot = await api('/v1.0/status/418', { token });
    expect(teapot.statusCode).toBe(418);
    expect(await teapot.body.json()).toEqual({ status: 418 });
    const empty = await api('/v1.0/status/204', { token });
    expect(empty.statusCode).toBe(204);
    await empty.body.dump();

    await expect(api('/v1.0/reset', { token })).rejects.toThrow();
    expect(standin.apiRequests.at(-1)).toMatchObject({ url: '/v1.0/reset', status: 0 });

    const missing = await api('/v1.0/nothing-here', { token });
    expect(missing.statusCode).toBe(404);
    expect(await missing.body.json()).toMatchObject({ errors: [{ code: 'not_found' }] });
    const outside = await api('/v2/contracts/');
    expect(outside.statusCode).toBe(404);
    await outside.body.dump();
    expect(standin.apiRequests.at(-1)).toMatchObject({ url: '/v2/contracts/', status: 404 });
  });
});

describe('lifecycle and HTTP/2', () => {
  it(
    'close() ends hanging token requests and slow API requests at once',
    { timeout: 3000 },
    async () => {
      const s = await startStandin({ pki });
      const token = await accessToken(s);
      s.failTokenRequests({ kind: 'hang' });
      const hung = postJson(s, clientCredentials).catch((error: unknown) => error);
      const slow = api('/v1.0/slow/60000', { token }, s).catch((error: unknown) => error);
      const slowBody = api('/v1.0/slow-body/60000', { token }, s)
        .then(
          async (res) => res.body.text(),
          (error: unknown) => error,
        )
        .catch((error: unknown) => error);
      await inFlight.sleep(100);
      await s.close();
      expect(await hung).toBeInstanceOf(Error);
      expect(await slow).toBeInstanceOf(Error);
      expect(await slowBody).toBeInstanceOf(Error);
    },
  );

  it('negotiates h2 through ALPN when http2 is on', async () => {
    const s = await startStandin({ pki, http2: true });
    let session: ClientHttp2Session | undefined;
    try {
      const token = await accessToken(s); // HTTP/1.1 still works
      session = connect(s.url, { ca: pki.caCert });
      await new Promise<void>((resolve, reject) => {
        session!.once('connect', () => resolve());
        session!.once('error', reject);
      });
      expect(session.alpnProtocol).toBe('h2');
      const stream = session.request({
        ':method': 'GET',
        ':path': '/v1.0/echo/h2',
        authorization: `Bearer ${token}`,
      });
      stream.end();
      const chunks: Buffer[] = [];
      const status = await new Promise<number>((resolve, reject) => {
        let code = 0;
        stream.on('response', (headers) => (code = Number(headers[':status'])));
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('end', () => resolve(code));
        stream.on('error', reject);
      });
      expect(status).toBe(200);
      expect(JSON.parse(Buffer.concat(chunks).toString())).toMatchObject({ httpVersion: '2.0' });
      expect(s.apiRequests.at(-1)).toMatchObject({ httpVersion: '2.0', status: 200 });
    } finally {
      session?.close();
      await s.close();
    }
  });
});
