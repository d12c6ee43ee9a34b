/**
 * The stand-in as caller-token issuer (docs/security.md "Caller identity on the shared gateway"):
 * discovery and JWKS over its HTTPS, and minted tokens that jose verifies against the served
 * keys, fetched the way a verifier does (discovery → jwks_uri, createRemoteJWKSet), with the
 * stand-in's own CA.
 */
import { createRemoteJWKSet, customFetch, decodeProtectedHeader, errors, jwtVerify } from 'jose';
import { Agent, fetch, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callerClaimsProblem, createCallerIssuer } from '../src/standin/issuer.js';
import { startStandin, type Standin } from '../src/standin/index.js';

let standin: Standin;
let agent: Agent;

beforeAll(async () => {
  standin = await startStandin();
  agent = new Agent({ connect: { ca: standin.caCert } });
});

afterAll(async () => {
  await standin.close();
  await agent.close();
});

async function getJson(url: string, headers: Record<string, string> = {}, a: Agent = agent) {
  const res = await request(url, { dispatcher: a, headers });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    body: text === '' ? undefined : JSON.parse(text),
  };
}

/** Discovery → jwks_uri → a remote key set, as a verifier resolves them. */
async function remoteKeys(s: Standin, a: Agent = agent) {
  const discovery = await getJson(`${s.url}/.well-known/openid-configuration`, {}, a);
  const jwksUri = (discovery.body as { jwks_uri: string }).jwks_uri;
  return createRemoteJWKSet(new URL(jwksUri), {
    // undici's fetch with the stand-in's CA; jose reads status, headers and json() of the answer.
    [customFetch]: async (url, options) =>
      await fetch(url, {
        method: options.method,
        headers: Object.fromEntries(options.headers),
        redirect: options.redirect,
        signal: options.signal,
        dispatcher: a,
      }),
  });
}

const verifyOptions = (s: Standin) => ({
  issuer: s.url,
  audience: 'oauth-sidecar',
  algorithms: ['ES256', 'RS256', 'PS256'],
  requiredClaims: ['exp'],
});

describe('the stand-in as issuer', () => {
  it('serves OIDC discovery naming itself and its JWKS, and a JWKS with one public ES256 key', async () => {
    const discovery = await getJson(`${standin.url}/.well-known/openid-configuration`);
    expect(discovery.status).toBe(200);
    expect(discovery.body).toMatchObject({
      issuer: standin.url,
      jwks_uri: `${standin.url}/openid/v1/jwks`,
      id_token_signing_alg_values_supported: ['ES256'],
    });
    const jwks = await getJson(`${standin.url}/openid/v1/jwks`);
    expect(jwks.status).toBe(200);
    expect(jwks.headers['content-type']).toBe('application/jwk-set+json');
    const keys = (jwks.body as { keys: Record<string, unknown>[] }).keys;
    expect(keys).toEqual([
      {
        kty: 'EC',
        crv: 'P-256',
        x: expect.any(String),
        y: expect.any(String),
        kid: standin.caller.kid,
        alg: 'ES256',
        use: 'sig',
      },
    ]);
    expect(JSON.stringify(jwks.body)).not.toContain('"d"');
    expect(standin.issuerRequests.map((r) => [r.path, r.status])).toEqual([
      ['/.well-known/openid-configuration', 200],
      ['/openid/v1/jwks', 200],
    ]);
  });

  it('mints a token that jose verifies against the served keys with the right iss, aud, sub and exp', async () => {
    const token = await standin.caller.mint({ sub: 'system:serviceaccount:research:notebook' });
    expect(decodeProtectedHeader(token)).toEqual({
      alg: 'ES256',
      kid: standin.caller.kid,
      typ: 'JWT',
    });
    const { payload } = await jwtVerify(token, await remoteKeys(standin), verifyOptions(standin));
    expect(payload).toMatchObject({
      iss: standin.url,
      sub: 'system:serviceaccount:research:notebook',
      aud: 'oauth-sidecar',
      'kubernetes.io': { namespace: 'research', serviceaccount: { name: 'notebook' } },
    });
    expect(payload.exp! - payload.iat!).toBe(3600);
    expect(payload.nbf).toBe(payload.iat);
    expect(Math.abs(payload.iat! * 1000 - Date.now())).toBeLessThan(60_000);
  });

  it('honours the audience and lifetime asked for; the verifier refuses another audience and an expired token', async () => {
    const keys = await remoteKeys(standin);
    const other = await standin.caller.mint({ sub: 'alice', aud: 'someone-else', ttlSeconds: 60 });
    await expect(jwtVerify(other, keys, verifyOptions(standin))).rejects.toBeInstanceOf(
      errors.JWTClaimValidationFailed,
    );
    const short = await standin.caller.mint({ sub: 'alice', ttlSeconds: 60 });
    const { payload } = await jwtVerify(short, keys, verifyOptions(standin));
    expect(payload.exp! - payload.iat!).toBe(60);
    await expect(
      jwtVerify(short, keys, {
        ...verifyOptions(standin),
        currentDate: new Date((payload.exp! + 1) * 1000),
      }),
    ).rejects.toBeInstanceOf(errors.JWTExpired);
    // Not a Kubernetes subject: no kubernetes.io claim.
    expect(payload['kubernetes.io']).toBeUndefined();
  });

  it('keeps its key when given it: a token of one stand-in verifies against a later one with the same key', async () => {
    const later = await startStandin({ callerKeyPem: standin.caller.keyPem });
    const laterAgent = new Agent({ connect: { ca: later.caCert } });
    try {
      expect(later.caller.kid).toBe(standin.caller.kid);
      const token = await standin.caller.mint({ sub: 'bob' });
      const keys = await remoteKeys(later, laterAgent);
      // The key verifies; only the issuer (the URL, another port) differs.
      await expect(jwtVerify(token, keys, verifyOptions(later))).rejects.toBeInstanceOf(
        errors.JWTClaimValidationFailed,
      );
      const { payload } = await jwtVerify(token, keys, {
        ...verifyOptions(later),
        issuer: standin.url,
      });
      expect(payload.sub).toBe('bob');
      // A fresh stand-in has a key of its own.
      const fresh = await startStandin();
      expect(fresh.caller.kid).not.toBe(standin.caller.kid);
      await fresh.close();
    } finally {
      await later.close();
      await laterAgent.close();
    }
  });

  it('wants a bearer to read discovery and keys when told to, as the Kubernetes API server does', async () => {
    standin.caller.setReaderToken('reader-token');
    try {
      const before = standin.issuerRequests.length;
      expect((await getJson(`${standin.url}/openid/v1/jwks`)).status).toBe(401);
      const wrong = { authorization: 'Bearer other' };
      expect((await getJson(`${standin.url}/openid/v1/jwks`, wrong)).status).toBe(401);
      const right = { authorization: 'Bearer reader-token' };
      expect((await getJson(`${standin.url}/openid/v1/jwks`, right)).status).toBe(200);
      expect((await getJson(`${standin.url}/.well-known/openid-configuration`, right)).status).toBe(
        200,
      );
      expect(standin.issuerRequests.slice(before).map((r) => r.status)).toEqual([
        401, 401, 200, 200,
      ]);
    } finally {
      standin.caller.setReaderToken(undefined);
    }
    const post = await request(`${standin.url}/openid/v1/jwks`, {
      method: 'POST',
      dispatcher: agent,
    });
    await post.body.dump();
    expect(post.statusCode).toBe(405);
  });

  it('refuses claims it cannot mint and keys that are not P-256', async () => {
    expect(callerClaimsProblem({ sub: '' })).toMatch(/subject/);
    expect(callerClaimsProblem({ sub: 'a b' })).toMatch(/subject/);
    expect(callerClaimsProblem({ sub: 'a', ttlSeconds: 0 })).toMatch(/lifetime/);
    expect(callerClaimsProblem({ sub: 'a', ttlSeconds: 86_401 })).toMatch(/lifetime/);
    expect(callerClaimsProblem({ sub: 'a', ttlSeconds: 1.5 })).toMatch(/lifetime/);
    expect(callerClaimsProblem({ sub: 'a', aud: '' })).toMatch(/audience/);
    expect(callerClaimsProblem({ sub: 'a', aud: 'x', ttlSeconds: 86_400 })).toBeUndefined();
    await expect(standin.caller.mint({ sub: '' })).rejects.toThrow(/subject/);
    const { generateKeyPairSync } = await import('node:crypto');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    });
    await expect(createCallerIssuer(rsa.toString())).rejects.toThrow(/P-256/);
  });
});
