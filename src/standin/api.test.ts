import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { manualClock, type ManualClock } from '../../test/helpers/manual-clock.js';
import { startCountingUpstream, type CountingUpstream } from '../../test/helpers/upstream.js';
import { waitFor } from '../../test/helpers/wait.js';
import { API_PREFIXES, SAMPLE_CONTRACTS, handleApiRequest } from './api.js';
import { createTestPki } from './pki.js';
import { createState, type StandinState } from './state.js';
import type { TestPki } from './types.js';

let pki: TestPki;
let agent: Agent;
let upstream: CountingUpstream;
let state: StandinState;
let clock: ManualClock;
let token: string;

beforeAll(async () => {
  pki = await createTestPki();
  agent = new Agent({ connect: { ca: pki.caCert } });
  clock = manualClock();
  state = await createState({ clock, tokenLifetimeSeconds: 600 });
  // The API routes alone on a real HTTPS server on 127.0.0.1, port 0.
  upstream = await startCountingUpstream(pki, (req, res, done) => {
    void handleApiRequest(req, res, state).finally(done);
  });
});
afterEach(() => state.apiFaults.clear());
afterAll(async () => {
  await agent.close();
  await upstream.close();
});

beforeAll(() => {
  token = state.tokens.issue(false).accessToken;
});

function api(
  path: string,
  options: { method?: string; headers?: Record<string, string>; bearer?: string | null } = {},
) {
  const bearer = options.bearer === undefined ? token : options.bearer;
  return request(`${upstream.url}${path}`, {
    method: (options.method ?? 'GET') as 'GET',
    dispatcher: agent,
    headers: {
      ...(bearer === null ? {} : { authorization: `Bearer ${bearer}` }),
      ...options.headers,
    },
  });
}

describe('the stand-in API routes', () => {
  it('serve only under the API prefixes', async () => {
    expect(API_PREFIXES).toEqual(['/v1.0/', '/beta/']);
    const outside = await api('/v2/contracts/');
    expect(outside.statusCode).toBe(404);
    expect(await outside.body.json()).toEqual({
      errors: [{ code: 'not_found', detail: 'no route for /v2/contracts/' }],
    });
  });

  it('want an access token the store holds valid now, by the injected clock', async () => {
    const expiring = state.tokens.issue(false).accessToken;
    expect((await api('/v1.0/contracts/', { bearer: expiring })).statusCode).toBe(200);
    clock.advance(600_000);
    const expired = await api('/v1.0/contracts/', { bearer: expiring });
    expect(expired.statusCode).toBe(401);
    expect(expired.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    expect(await expired.body.json()).toEqual({
      errors: [{ code: 'unauthorized', detail: 'the access token is unknown, expired or revoked' }],
    });
    token = state.tokens.issue(false).accessToken;
    const none = await api('/v1.0/contracts/', { bearer: null });
    expect((await none.body.json()) as object).toEqual({
      errors: [{ code: 'unauthorized', detail: 'a bearer token is required' }],
    });
  });

  it('list the contracts as JSON, as CSV on request, and refuse other methods', async () => {
    expect(await (await api('/v1.0/contracts/')).body.json()).toEqual({ data: SAMPLE_CONTRACTS });
    const csv = await api('/v1.0/contracts/', { headers: { accept: 'text/csv' } });
    expect((await csv.body.text()).split('\r\n')).toHaveLength(SAMPLE_CONTRACTS.length + 2);
    const post = await api('/v1.0/contracts/', { method: 'DELETE' });
    expect([post.statusCode, post.headers.allow]).toEqual([405, 'GET, HEAD']);
    await post.body.dump();
    expect((await api('/v1.0/contracts/extra')).statusCode).toBe(404);
  });

  it('answer a maintenance window on a prefix, with Retry-After, until it is cleared', async () => {
    state.apiFaults.set('/v1.0/contracts', { status: 503, retryAfter: '120' });
    const down = await api('/v1.0/contracts/');
    expect([down.statusCode, down.headers['retry-after']]).toEqual([503, '120']);
    expect(await down.body.json()).toEqual({
      errors: [{ code: 'maintenance', detail: 'Maintenance Mode' }],
    });
    const other = await api('/v1.0/status/200');
    expect(other.statusCode).toBe(200);
    await other.body.dump();
    state.apiFaults.clear();
    const up = await api('/v1.0/contracts/');
    expect(up.statusCode).toBe(200);
    await up.body.dump();
  });

  it('a slow route answers when the injected clock reaches its delay', async () => {
    const before = clock.pending();
    const answer = api('/v1.0/slow/45000');
    // The request crosses a real socket: wait (without asserting time) until the timer is set.
    await waitFor(() => clock.pending() === before + 1, 10_000, 'the slow route timer');
    clock.advance(45_000);
    expect(await (await answer).body.json()).toEqual({ waitedMs: 45_000 });
  });

  it('answer any status asked for, with Retry-After when asked, and refuse a bad one', async () => {
    const limited = await api('/v1.0/status/429?retry-after=30');
    expect([limited.statusCode, limited.headers['retry-after']]).toEqual([429, '30']);
    expect(await limited.body.json()).toEqual({ status: 429 });
    const notModified = await api('/v1.0/status/304');
    expect(notModified.statusCode).toBe(304);
    await notModified.body.dump();
    const bad = await api('/v1.0/status/99');
    expect(bad.statusCode).toBe(400);
    await bad.body.dump();
  });

  it('record each request as its headers go out, with the bearer presented', async () => {
    const res = await api('/v1.0/echo/x?q=1', { headers: { 'x-probe': 'p' } });
    await res.body.dump();
    expect(state.apiRequests.at(-1)).toMatchObject({
      method: 'GET',
      url: '/v1.0/echo/x?q=1',
      token,
      status: 200,
      bodyBytes: 0,
      headers: expect.objectContaining({ 'x-probe': 'p' }),
      at: clock.now(),
    });
  });
});
