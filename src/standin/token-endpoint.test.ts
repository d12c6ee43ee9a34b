import pino from 'pino';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { manualClock, type ManualClock } from '../../test/helpers/manual-clock.js';
import { useHttpsServers } from '../../test/helpers/https-servers.js';
import { waitFor } from '../../test/helpers/wait.js';
import { createState, type StandinState } from './state.js';
import { handleTokenRequest } from './token-endpoint.js';
import type { StandinOptions } from './types.js';

const SECRET = 'endpoint-secret-3c9a';
const CLIENT = { clientId: 'client-a', clientSecret: SECRET };
const CC = { grantType: 'clientCredentials', ...CLIENT };

const servers = useHttpsServers();

interface Endpoint {
  state: StandinState;
  clock: ManualClock;
  logLines: string[];
  post(body: unknown, headers?: Record<string, string>): Promise<Answer>;
}
interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
}

/** The token endpoint alone on a real HTTPS server on 127.0.0.1, port 0, over a hand-driven clock. */
async function endpoint(options: StandinOptions = {}): Promise<Endpoint> {
  const clock = manualClock();
  const logLines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });
  const state = await createState({ ...CLIENT, ...options, clock, logger });
  const upstream = await servers.start((req, res, done) => {
    void handleTokenRequest(req, res, state).finally(done);
  });
  const post = async (body: unknown, headers: Record<string, string> = {}): Promise<Answer> => {
    const isForm = typeof body === 'string';
    const res = await request(`${upstream.url}/oauth/token/`, {
      method: 'POST',
      dispatcher: servers.agent(),
      headers: {
        'content-type': isForm ? 'application/x-www-form-urlencoded' : 'application/json',
        ...headers,
      },
      body: isForm ? body : JSON.stringify(body),
    });
    const text = await res.body.text();
    return {
      status: res.statusCode,
      headers: res.headers,
      body: text === '' ? {} : JSON.parse(text),
    };
  };
  return { state, clock, logLines, post };
}

describe('the stand-in token endpoint', () => {
  it('issues a token set in format A, not to be cached, and records the request', async () => {
    const { state, post } = await endpoint();
    const answer = await post({ ...CC, scopes: 'read' });
    expect(answer.status).toBe(201);
    expect(answer.headers).toMatchObject({ 'cache-control': 'no-store', pragma: 'no-cache' });
    expect(answer.body).toEqual({
      accessToken: expect.stringMatching(/^at_/),
      refreshToken: expect.stringMatching(/^rt_/),
      tokenType: 'Bearer',
      expiresIn: 1799,
    });
    expect(state.tokens.accessTokenValid(answer.body.accessToken as string)).toBe(true);
    expect(state.tokenRequests).toEqual([
      expect.objectContaining({
        format: 'json',
        grant: 'client_credentials',
        auth: 'body',
        clientId: 'client-a',
        secretOk: true,
        scopes: 'read',
        outcome: 'issued',
        status: 201,
      }),
    ]);
  });

  it('answers format B in snake_case, with the status it is set to', async () => {
    const { post } = await endpoint({ tokenStatus: 200 });
    const answer = await post('grant_type=client_credentials', {
      authorization: `Basic ${Buffer.from(`client-a:${SECRET}`).toString('base64')}`,
    });
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body)).toEqual([
      'access_token',
      'refresh_token',
      'token_type',
      'expires_in',
    ]);
  });

  it('refuses a wrong secret (with a Basic challenge when Basic was used) and a missing client', async () => {
    const { post, state } = await endpoint();
    const wrong = await post('grant_type=client_credentials', {
      authorization: `Basic ${Buffer.from('client-a:nope').toString('base64')}`,
    });
    expect(wrong).toMatchObject({
      status: 401,
      headers: { 'www-authenticate': 'Basic realm="oauth"' },
      body: { error: 'invalid_client', error_description: 'unknown client or wrong client secret' },
    });
    const none = await post({ grantType: 'clientCredentials' });
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBeUndefined();
    expect(none.body.error_description).toBe('client authentication is required');
    expect(state.tokenRequests.map((r) => r.outcome)).toEqual(['rejected', 'rejected']);
  });

  it('spends a refresh token once, with no client credentials needed', async () => {
    const { post } = await endpoint();
    const first = await post(CC);
    const refresh = { grantType: 'refreshToken', refreshToken: first.body.refreshToken };
    const second = await post(refresh);
    expect(second.status).toBe(201);
    expect(second.body.refreshToken).not.toBe(first.body.refreshToken);
    expect(await post(refresh)).toMatchObject({
      status: 400,
      body: { error: 'invalid_grant' },
    });
    expect(await post({ grantType: 'refreshToken' })).toMatchObject({
      status: 400,
      body: { error: 'invalid_request', error_description: '"refreshToken" is required' },
    });
  });

  it('names the grants its format spells, and a missing one', async () => {
    const { post } = await endpoint();
    expect((await post({ ...CC, grantType: 'client_credentials' })).body).toEqual({
      error: 'unsupported_grant_type',
      error_description: '"grantType" must be clientCredentials or refreshToken',
    });
    expect((await post('client_id=a')).body).toEqual({
      error: 'invalid_request',
      error_description: '"grant_type" is required',
    });
  });

  it('refuses another method, an unreadable body and one over 64 KiB', async () => {
    const { post, state } = await endpoint();
    const get = await request(`${servers.opened[0]!.url}/oauth/token/`, {
      dispatcher: servers.agent(),
    });
    expect([get.statusCode, get.headers.allow]).toEqual([405, 'POST']);
    await get.body.dump();
    expect((await post('{', { 'content-type': 'application/json' })).body).toEqual({
      errors: [{ code: 'invalid_request', detail: 'the body is not valid JSON' }],
    });
    const huge = await post({ ...CC, pad: 'x'.repeat(70_000) });
    expect(huge.status).toBe(400);
    expect(huge.body).toEqual({
      errors: [{ code: 'invalid_request', detail: 'the body is larger than 65536 bytes' }],
    });
    expect(state.tokenRequests.at(-1)?.format).toBe('other');
  });

  it('carries a null refresh token, then none, as many times as asked', async () => {
    const { post, state } = await endpoint();
    state.nullRefreshTokenNext = 1;
    state.omitRefreshTokenNext = 1;
    expect((await post(CC)).body.refreshToken).toBeNull();
    expect('refreshToken' in (await post(CC)).body).toBe(false);
    expect((await post(CC)).body.refreshToken).toMatch(/^rt_/);
  });

  it('a delay fault answers when the injected clock reaches it', async () => {
    const { post, state, clock } = await endpoint();
    state.faultQueue.push({ fault: { kind: 'delay', ms: 30_000 }, remaining: 1 });
    const answer = post(CC);
    // The request crosses a real socket: wait (without asserting time) until the timer is set.
    await waitFor(() => clock.pending() === 1, 10_000, 'the delay timer');
    clock.advance(29_999);
    expect(state.tokenRequests).toEqual([]);
    clock.advance(1);
    expect((await answer).status).toBe(201);
  });

  it('a fault answers instead of the grant and leaves the refresh token usable', async () => {
    const { post, state } = await endpoint();
    const refreshToken = (await post(CC)).body.refreshToken;
    state.faultQueue.push({ fault: { kind: 'status', status: 503 }, remaining: 1 });
    const refresh = { grantType: 'refreshToken', refreshToken };
    expect((await post(refresh)).status).toBe(503);
    expect((await post(refresh)).status).toBe(201);
    expect(state.tokenRequests.map((r) => r.outcome)).toEqual(['issued', 'fault', 'issued']);
  });

  it('logs each request without a secret or a token', async () => {
    const { post, state, logLines } = await endpoint();
    await post(CC);
    await post({ ...CC, clientSecret: 'wrong-secret-value' });
    expect(logLines).toHaveLength(2);
    const log = logLines.join('');
    for (const secret of [SECRET, 'wrong-secret-value', ...state.tokens.issued()]) {
      expect(log).not.toContain(secret);
    }
    expect(JSON.parse(logLines[0]!)).toMatchObject({
      msg: 'stand-in token request',
      grant: 'client_credentials',
      outcome: 'issued',
      status: 201,
    });
  });
});
