import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../test/helpers/manual-clock.js';
import { waitFor } from '../../test/helpers/wait.js';
import { DISCOVERY_PATH, JWKS_PATH } from './issuer.js';
import { createTestPki } from './pki.js';
import { startStandin } from './server.js';
import type { Standin, TestPki } from './types.js';

let pki: TestPki;
let agent: Agent;
beforeAll(async () => {
  pki = await createTestPki();
  agent = new Agent({ connect: { ca: pki.caCert } });
});
afterAll(() => agent.close());

const CC = { grantType: 'clientCredentials', clientId: 'demo-client', clientSecret: 'demo-secret' };

function token(s: Standin, path = '/oauth/token/', body: object = CC) {
  return request(`${s.url}${path}`, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

describe('startStandin', () => {
  it('listens on 127.0.0.1, a free port, and routes the token endpoint, the issuer and the API', async () => {
    const clock = manualClock();
    const s = await startStandin({ pki, clock });
    try {
      expect(s.url).toBe(`https://127.0.0.1:${s.port}`);
      expect(s.port).toBeGreaterThan(0);
      expect(s.caCert).toBe(pki.caCert);
      for (const path of ['/oauth/token/', '/oauth/token', '/oauth/token/?x=1']) {
        const res = await token(s, path);
        expect(res.statusCode).toBe(201);
        await res.body.dump();
      }
      const discovery = await request(`${s.url}${DISCOVERY_PATH}`, { dispatcher: agent });
      expect(await discovery.body.json()).toMatchObject({
        issuer: s.url,
        jwks_uri: `${s.url}${JWKS_PATH}`,
      });
      const jwks = await request(`${s.url}${JWKS_PATH}`, { dispatcher: agent });
      expect(await jwks.body.json()).toEqual(s.caller.jwks);
      expect(s.issuerRequests.map((r) => [r.path, r.status, r.at])).toEqual([
        [DISCOVERY_PATH, 200, clock.now()],
        [JWKS_PATH, 200, clock.now()],
      ]);
      const api = await request(`${s.url}/v1.0/contracts/`, { dispatcher: agent });
      expect(api.statusCode).toBe(401);
      await api.body.dump();
      expect(s.tokenRequests.map((r) => r.at)).toEqual([clock.now(), clock.now(), clock.now()]);
      expect(s.issuedTokens()).toHaveLength(6);
    } finally {
      await s.close();
    }
  });

  it('steers faults, secrets and lifetimes through its controls', async () => {
    const s = await startStandin({ pki, clock: manualClock() });
    try {
      s.failTokenRequests({ kind: 'status', status: 500 }, 2);
      s.failTokenRequestsRandomly({ kind: 'status', status: 502 }, 1);
      expect((await token(s)).statusCode).toBe(500);
      s.clearTokenFaults();
      expect((await token(s)).statusCode).toBe(201);
      s.failTokenRequestsRandomly({ kind: 'status', status: 502 }, 1);
      expect((await token(s)).statusCode).toBe(502);
      s.failTokenRequestsRandomly({ kind: 'status', status: 502 }, 0);
      s.setTokenLifetime(42);
      const issued = await token(s);
      const body = (await issued.body.json()) as { accessToken: string; expiresIn: number };
      expect(body.expiresIn).toBe(42);
      expect(s.accessTokenValid(body.accessToken)).toBe(true);
      s.setClientSecret('rotated');
      expect((await token(s)).statusCode).toBe(401);
      s.failApiRequests('/v1.0/', 503, '9');
      const api = await request(`${s.url}/v1.0/contracts/`, {
        dispatcher: agent,
        headers: { authorization: `Bearer ${body.accessToken}` },
      });
      expect([api.statusCode, api.headers['retry-after']]).toEqual([503, '9']);
      await api.body.dump();
      s.clearApiFaults();
      s.revokeAccessTokens();
      expect(s.accessTokenValid(body.accessToken)).toBe(false);
    } finally {
      await s.close();
    }
  });

  it('mints caller tokens as of its clock, under a key a later stand-in can keep', async () => {
    const clock = manualClock(Date.UTC(2026, 2, 1));
    const s = await startStandin({ pki, clock });
    const later = await startStandin({ pki, callerKeyPem: s.caller.keyPem });
    try {
      const jwt = await s.caller.mint({ sub: 'system:serviceaccount:ns:app' });
      const payload = JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as {
        iss: string;
        iat: number;
      };
      expect(payload.iss).toBe(s.url);
      expect(payload.iat).toBe(Date.UTC(2026, 2, 1) / 1000);
      expect(later.caller.kid).toBe(s.caller.kid);
      s.caller.setReaderToken('reader');
      const refused = await request(`${s.url}${JWKS_PATH}`, { dispatcher: agent });
      expect(refused.statusCode).toBe(401);
      await refused.body.dump();
    } finally {
      await Promise.all([s.close(), later.close()]);
    }
  });

  it('close() ends a hung token request at once, and closing twice is one close', async () => {
    const s = await startStandin({ pki });
    s.failTokenRequests({ kind: 'hang' });
    const hung = token(s).catch((error: unknown) => error);
    // The request crosses a real socket: wait (without asserting time) until it was recorded.
    await waitFor(() => s.tokenRequests.length === 1, 10_000, 'the hung request');
    const closing = s.close();
    expect(s.close()).toBe(closing);
    await closing;
    expect(await hung).toBeInstanceOf(Error);
  });

  it('a port in use is an error from startStandin', async () => {
    const s = await startStandin({ pki });
    try {
      await expect(startStandin({ pki, port: s.port })).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await s.close();
    }
  });
});
