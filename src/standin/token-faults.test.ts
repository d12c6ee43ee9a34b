import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { manualClock } from '../../test/helpers/manual-clock.js';
import { useHttpsServers } from '../../test/helpers/https-servers.js';
import type { CountingUpstream } from '../../test/helpers/upstream.js';
import { waitFor } from '../../test/helpers/wait.js';
import { createState, type StandinState } from './state.js';
import { applyFault } from './token-faults.js';
import type { RecordedTokenRequest, TokenFault } from './types.js';

const servers = useHttpsServers();

type Applied = Exclude<TokenFault, { kind: 'delay' }>;

/** Every request to a real HTTPS server on 127.0.0.1, port 0, suffers `fault`. */
async function faulty(
  fault: Applied,
  format: 'json' | 'form' | 'other' = 'json',
): Promise<{ state: StandinState; upstream: CountingUpstream; get(): ReturnType<typeof request> }> {
  const state = await createState({ clock: manualClock(Date.UTC(2026, 5, 1, 12)) });
  const upstream = await servers.start((req, res, done) => {
    res.once('close', done);
    const record: RecordedTokenRequest = {
      at: state.clock.now(),
      format,
      grant: 'client_credentials',
      auth: 'body',
      clientId: 'c',
      secretOk: true,
      scopes: undefined,
      refreshToken: undefined,
      outcome: 'issued',
      status: undefined,
    };
    applyFault(req, res, state, record, format, fault);
  });
  return {
    state,
    upstream,
    get: () => request(`${upstream.url}/oauth/token/`, { dispatcher: servers.agent() }),
  };
}

async function json(fault: Applied, format?: 'json' | 'form') {
  const { get, state } = await faulty(fault, format);
  const res = await get();
  return {
    status: res.statusCode,
    body: (await res.body.json()) as Record<string, unknown>,
    state,
  };
}

describe('token endpoint faults', () => {
  it('an error status carries the fault body, Retry-After, Age and a Date off the clock', async () => {
    const { get, state } = await faulty({
      kind: 'status',
      status: 503,
      retryAfter: '7',
      age: '30',
      dateOffsetMs: -60_000,
    });
    const res = await get();
    expect(res.statusCode).toBe(503);
    expect(res.headers).toMatchObject({
      'retry-after': '7',
      age: '30',
      date: new Date(Date.UTC(2026, 5, 1, 11, 59)).toUTCString(),
      'cache-control': 'no-store',
    });
    expect(await res.body.json()).toEqual({
      errors: [{ code: 'injected_fault', detail: 'stand-in fault 503' }],
    });
    expect(state.tokenRequests).toEqual([
      expect.objectContaining({ outcome: 'fault', status: 503 }),
    ]);
  });

  it('an error status may carry its own body and type, and no Date at all', async () => {
    const { get } = await faulty({
      kind: 'status',
      status: 400,
      body: 'error=invalid_client',
      contentType: 'text/plain',
      dateOffsetMs: null,
    });
    const res = await get();
    expect([res.statusCode, res.headers['content-type'], res.headers.date]).toEqual([
      400,
      'text/plain',
      undefined,
    ]);
    expect(await res.body.text()).toBe('error=invalid_client');
  });

  it('a gateway page, a redirect', async () => {
    const html = await (await faulty({ kind: 'html' })).get();
    expect([html.statusCode, html.headers['content-type']]).toEqual([
      200,
      'text/html; charset=utf-8',
    ]);
    expect(await html.body.text()).toContain('<h1>Service Unavailable</h1>');
    const redirect = await (
      await faulty({ kind: 'redirect', location: 'https://elsewhere/' })
    ).get();
    expect([redirect.statusCode, redirect.headers.location]).toEqual([302, 'https://elsewhere/']);
    await redirect.body.dump();
  });

  it('an answer of exactly the bytes asked for, its access token the padding', async () => {
    for (const bytes of [300_000, 10]) {
      const res = await (await faulty({ kind: 'huge', bytes })).get();
      expect(res.statusCode).toBe(201);
      expect(res.headers['content-length']).toBe(String(bytes));
      const body = Buffer.from(await res.body.arrayBuffer());
      expect(body.length).toBe(bytes);
      expect(body.subarray(0, 10).toString()).toBe('{"accessTo');
    }
    const form = await (await faulty({ kind: 'huge', bytes: 100 }, 'form')).get();
    expect((await form.body.text()).startsWith('{"access_token":"aaa')).toBe(true);
  });

  it('malformed token answers, in the casing of the request, whose tokens are registered', async () => {
    const missing = await json({ kind: 'missing-access-token' });
    expect(missing.body).toEqual({
      refreshToken: expect.stringMatching(/^rt_/),
      tokenType: 'Bearer',
      expiresIn: 1799,
    });
    expect((await json({ kind: 'access-token', value: 'a b' })).body.accessToken).toBe('a b');
    expect((await json({ kind: 'token-type', tokenType: 'mac' }, 'form')).body.token_type).toBe(
      'mac',
    );
    const omitted = await json({ kind: 'expires-in', omit: true }, 'form');
    expect('expires_in' in omitted.body).toBe(false);
    expect(omitted.state.tokens.accessTokenValid(omitted.body.access_token as string)).toBe(true);
    expect((await json({ kind: 'expires-in', value: 'abc' })).body.expiresIn).toBe('abc');
  });

  it('a reset answers nothing and ends the connection', async () => {
    const { get, state } = await faulty({ kind: 'reset' });
    await expect(get()).rejects.toThrow();
    expect(state.tokenRequests).toEqual([
      expect.objectContaining({ outcome: 'fault', status: undefined }),
    ]);
  });

  it('a hang answers nothing until the server closes', async () => {
    const { get, state, upstream } = await faulty({ kind: 'hang' });
    const pending = get();
    let settled = false;
    void pending.then(
      () => (settled = true),
      () => (settled = true),
    );
    // The request crosses a real socket: wait (without asserting time) until it was recorded.
    await waitFor(() => state.tokenRequests.length === 1, 10_000, 'the hung request');
    expect(settled).toBe(false);
    await upstream.close();
    await expect(pending).rejects.toThrow();
  });
});
