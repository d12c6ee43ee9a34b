/**
 * Caller identity on a shared gateway (docs/configuration.md "Caller identity"), end to end: the
 * bundle with `CALLER_AUTH=jwt` in front of the stand-in API, its keys from an HTTPS issuer of
 * this file's own (its own CA, discovery document and JWKS, counting fetches and the bearer it is
 * shown), tokens minted here with jose. Child processes: the waits are the suite's `waitFor`.
 */
import { createServer, type Server } from 'node:https';
import {
  SignJWT,
  exportJWK,
  generateKeyPair,
  type CryptoKey,
  type JWK,
  type KeyObject,
} from 'jose';
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki } from '../src/standin/index.js';
import {
  metricValue,
  runCli,
  startSidecarProcess,
  useStandin,
  waitFor,
  waitReady,
  writeTemp,
  type SidecarProcess,
} from './helpers/sidecar-process.js';

const CLIENT = { clientId: 'gateway-client', clientSecret: 'gateway-secret' };
const fixture = useStandin(CLIENT);
const GATEWAY_BEARER = 'gateway-own-projected-token';

interface Key {
  kid: string;
  alg: 'RS256' | 'ES256';
  jwk: JWK;
  privateKey: CryptoKey | KeyObject;
}

async function newKey(kid: string, alg: Key['alg']): Promise<Key> {
  const { publicKey, privateKey } = await generateKeyPair(alg);
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

/** The issuer: discovery and JWKS over HTTPS with a CA of its own; counts fetches. */
interface Issuer {
  url: string;
  caFile: string;
  keys: JWK[];
  jwksFetches: number;
  /** The Authorization each JWKS or discovery fetch presented. */
  bearers: (string | undefined)[];
  /** Answer 503 to everything while true. */
  failing: boolean;
  close(): Promise<void>;
}

async function startIssuer(): Promise<Issuer> {
  const pki = await createTestPki();
  const state = { keys: [] as JWK[], jwksFetches: 0, bearers: [] as (string | undefined)[] };
  let failing = false;
  let url = '';
  const server: Server = createServer({ cert: pki.serverCert, key: pki.serverKey }, (req, res) => {
    state.bearers.push(req.headers.authorization);
    if (failing) {
      res.writeHead(503).end();
      return;
    }
    if (req.url === '/.well-known/openid-configuration') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ issuer: url, jwks_uri: `${url}/openid/v1/jwks` }));
    } else if (req.url === '/openid/v1/jwks') {
      state.jwksFetches += 1;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: state.keys }));
    } else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    caFile: writeTemp('issuer-ca.pem', pki.caCert),
    get keys() {
      return state.keys;
    },
    set keys(keys) {
      state.keys = keys;
    },
    get jwksFetches() {
      return state.jwksFetches;
    },
    bearers: state.bearers,
    get failing() {
      return failing;
    },
    set failing(value) {
      failing = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const RULES = [
  'system:serviceaccount:apps:reports=reports',
  'system:serviceaccount:research:*=research GET /v1.0/contracts/',
].join(';');

let issuer: Issuer;
let rsa: Key;
let ec: Key;
let sidecar: SidecarProcess;
/** Every caller token minted here: none may appear in any output. */
const minted: string[] = [];

async function mint(
  key: Key,
  claims: Record<string, unknown>,
  header: Record<string, unknown> = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const payload = {
    iss: issuer.url,
    aud: 'oauth-sidecar',
    sub: 'system:serviceaccount:apps:reports',
    iat: now,
    exp: now + 600,
    ...claims,
  };
  const token = await new SignJWT(payload)
    .setProtectedHeader({ alg: key.alg, kid: key.kid, ...header })
    .sign(key.privateKey);
  minted.push(token);
  return token;
}

function gatewayEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    UPSTREAM_BASE_URL: fixture.standin.url,
    UPSTREAM_CA_FILE: fixture.caFile,
    CLIENT_ID: CLIENT.clientId,
    CLIENT_SECRET: CLIENT.clientSecret,
    UPSTREAM_RATE_LIMIT: '1000/s',
    CALLER_AUTH: 'jwt',
    CALLER_JWT_ISSUER: issuer.url,
    CALLER_JWT_CA_FILE: issuer.caFile,
    CALLER_JWT_BEARER_FILE: writeTemp('bearer', `${GATEWAY_BEARER}\n`),
    CALLER_RULES: RULES,
    ...extra,
  };
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  code: string | undefined;
}

async function call(
  path: string,
  authorization?: string,
  method: 'GET' | 'POST' = 'GET',
  fields: Record<string, string> = {},
): Promise<Answer> {
  const res = await request(`${sidecar.proxyUrl}${path}`, {
    method,
    headers: authorization === undefined ? fields : { authorization, ...fields },
    ...(method === 'POST' && { body: '{}' }),
  });
  const text = await res.body.text();
  let code: string | undefined;
  try {
    code = (JSON.parse(text) as { errors?: { code: string }[] }).errors?.[0]?.code;
  } catch {
    code = undefined;
  }
  return { status: res.statusCode, headers: res.headers, code };
}

/** API requests the stand-in saw whose target holds `marker`. */
const forwarded = (marker: string) =>
  fixture.standin.apiRequests.filter((r) => r.url.includes(marker));

beforeAll(async () => {
  issuer = await startIssuer();
  rsa = await newKey('rsa-1', 'RS256');
  ec = await newKey('ec-1', 'ES256');
  issuer.keys = [rsa.jwk, ec.jwk];
  sidecar = await startSidecarProcess(gatewayEnv());
  await waitReady(sidecar, 20_000);
}, 30_000);

afterAll(async () => {
  await sidecar?.stop();
  await issuer?.close();
});

describe('verified callers', () => {
  it('forwards RS256 and ES256 callers with only the sidecar bearer', async () => {
    for (const key of [rsa, ec]) {
      const token = await mint(key, {});
      const marker = `ok-${key.alg}`;
      const answer = await call(`/v1.0/contracts/?m=${marker}`, `Bearer ${token}`);
      expect(answer.status).toBe(200);
      const seen = forwarded(marker);
      expect(seen).toHaveLength(1);
      expect(fixture.standin.issuedTokens()).toContain(seen[0]!.token);
      expect(JSON.stringify(seen[0]!.headers)).not.toContain(token);
    }
    // A caller reusing its token is remembered: no second signature check.
    const token = await mint(ec, {});
    for (let i = 0; i < 3; i++) {
      expect((await call('/v1.0/contracts/?m=again', `Bearer ${token}`)).status).toBe(200);
    }
    expect(await metricValue(sidecar, 'oauth_sidecar_caller_auth_total{result="remembered"}')).toBe(
      2,
    );
    // Discovery and JWKS were read presenting the gateway's own bearer file, re-read and trimmed.
    expect(issuer.bearers).toContain(`Bearer ${GATEWAY_BEARER}`);
  });

  it('refuses every token that fails a check with 401 and forwards nothing', async () => {
    const now = Math.floor(Date.now() / 1000);
    const other = await newKey('rsa-1', 'RS256'); // another key under a known kid
    const [h, p] = (await mint(rsa, {})).split('.');
    const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none', kid: 'rsa-1' })).toString('base64url')}.${p}.`;
    const hsHeader = Buffer.from(JSON.stringify({ alg: 'HS256', kid: 'rsa-1' })).toString(
      'base64url',
    );
    // HS256 keyed with the public key's own text: the classic algorithm confusion.
    const hsMac = createHmac('sha256', JSON.stringify(rsa.jwk))
      .update(`${hsHeader}.${p}`)
      .digest('base64url');
    minted.push(unsigned, `${hsHeader}.${p}.${hsMac}`);
    const cases: [string, string | undefined][] = [
      ['none', undefined],
      ['garbage', 'Bearer not-a-token'],
      ['basic', 'Basic dXNlcjpwYXNz'],
      ['alg-none', `Bearer ${unsigned}`],
      ['hs256', `Bearer ${hsHeader}.${p}.${hsMac}`],
      ['other-key', `Bearer ${await mint(other, {})}`],
      ['wrong-aud', `Bearer ${await mint(rsa, { aud: 'another-service' })}`],
      ['wrong-iss', `Bearer ${await mint(rsa, { iss: 'https://elsewhere.example' })}`],
      ['expired', `Bearer ${await mint(ec, { exp: now - 300 })}`],
      ['nbf-future', `Bearer ${await mint(ec, { nbf: now + 600 })}`],
      ['no-exp', `Bearer ${await mint(ec, { exp: undefined })}`],
      ['too-large', `Bearer ${await mint(ec, { pad: 'x'.repeat(9000) })}`],
    ];
    expect(h).toBeDefined();
    for (const [name, authorization] of cases) {
      const answer = await call(`/v1.0/contracts/?m=bad-${name}`, authorization);
      expect({ name, status: answer.status, code: answer.code }).toEqual({
        name,
        status: 401,
        code: 'caller_unauthenticated',
      });
      expect(answer.headers['www-authenticate']).toBe(
        'Bearer realm="oauth-sidecar", error="invalid_token"',
      );
      expect(forwarded(`bad-${name}`)).toHaveLength(0);
    }
    expect(await metricValue(sidecar, 'oauth_sidecar_caller_auth_total{result="missing"}')).toBe(1);
    // The request line names the check that failed (the answer's body does not).
    const refusedLines = () => sidecar.stdout.filter((l) => l.includes('"callerCheck"'));
    await waitFor(() => refusedLines().length >= cases.length, 10_000, 'the request lines');
    const checks = refusedLines().map(
      (l) => (JSON.parse(l) as { callerCheck?: string }).callerCheck,
    );
    expect(new Set(checks)).toEqual(
      new Set([
        'missing',
        'malformed',
        'algorithm',
        'signature',
        'claims',
        'expired',
        'not_yet_valid',
      ]),
    );
    expect(await metricValue(sidecar, 'oauth_sidecar_caller_auth_total{result="expired"}')).toBe(1);
  });
});

describe('caller rules', () => {
  it('admits an exact subject and a prefix within its methods and paths, refuses the rest', async () => {
    const research = await mint(ec, { sub: 'system:serviceaccount:research:notebook' });
    const lookalike = await mint(ec, { sub: 'system:serviceaccount:research-x:notebook' });
    const unlisted = await mint(rsa, { sub: 'system:serviceaccount:other:app' });
    const reports = await mint(rsa, {});
    const tunnel = { 'x-http-method-override': 'DELETE' };
    const cases: [string, string, string, 'GET' | 'POST', number, Record<string, string>?][] = [
      ['exact', reports, '/v1.0/contracts/', 'GET', 200],
      ['prefix', research, '/v1.0/contracts/', 'GET', 200],
      ['prefix-other-path', research, '/v1.0/netforwards/', 'GET', 403],
      ['prefix-post', research, '/v1.0/contracts/', 'POST', 403],
      // A GET-only caller may not tunnel a DELETE through the override field the API may honour.
      ['prefix-tunnel', research, '/v1.0/contracts/', 'GET', 403, tunnel],
      ['lookalike', lookalike, '/v1.0/contracts/', 'GET', 403],
      ['unlisted', unlisted, '/v1.0/contracts/', 'GET', 403],
    ];
    for (const [name, token, path, method, status, fields] of cases) {
      const answer = await call(`${path}?m=rule-${name}`, `Bearer ${token}`, method, fields);
      expect({ name, status: answer.status }).toEqual({ name, status });
      if (status === 403) {
        expect(answer.code).toBe('caller_forbidden');
        expect(forwarded(`rule-${name}`)).toHaveLength(0);
      }
    }
  });

  it('shares the rate limit by the verified caller, as the request line says', async () => {
    const token = await mint(ec, { sub: 'system:serviceaccount:research:batch' });
    const before = await metricValue(
      sidecar,
      'oauth_sidecar_quota_requests_total{caller="research",outcome="admitted"}',
    );
    const answer = await call('/v1.0/contracts/?m=quota', `Bearer ${token}`);
    expect(answer.status).toBe(200);
    expect(answer.headers['ratelimit']).toBeDefined();
    expect(
      await metricValue(
        sidecar,
        'oauth_sidecar_quota_requests_total{caller="research",outcome="admitted"}',
      ),
    ).toBe(before + 1);
    await waitFor(
      () => sidecar.stdout.some((l) => l.includes('m=quota') || l.includes('"caller":"research"')),
      10_000,
      'the request line',
    );
    const line = sidecar.stdout.find(
      (l) => l.includes('"msg":"request"') && l.includes('"caller":"research"'),
    );
    expect(line).toBeDefined();
  });

  it('refuses QUOTA_CALLER_HEADER beside CALLER_AUTH=jwt with exit 78 naming both', async () => {
    const result = await runCli([], gatewayEnv({ QUOTA_CALLER_HEADER: 'x-caller' }));
    expect(result.code).toBe(78);
    expect(result.stderr).toContain('QUOTA_CALLER_HEADER');
    expect(result.stderr).toContain('CALLER_AUTH');
  });
});

describe('caller keys', () => {
  it('fetches at most 3 times for 60 tokens under unknown kids', async () => {
    const before = issuer.jwksFetches;
    const strangers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => newKey(`stranger-${i}`, 'ES256')),
    );
    const answers = await Promise.all(
      strangers.map(async (key) =>
        call('/v1.0/contracts/?m=stranger', `Bearer ${await mint(key, {})}`),
      ),
    );
    expect(answers.every((a) => a.status === 401)).toBe(true);
    expect(issuer.jwksFetches - before).toBeLessThanOrEqual(3);
    expect(forwarded('stranger')).toHaveLength(0);
  });

  it('waits for the first keys before it is ready', async () => {
    const late = await startIssuer();
    late.keys = [ec.jwk];
    late.failing = true;
    const gateway = await startSidecarProcess(
      gatewayEnv({ CALLER_JWT_ISSUER: late.url, CALLER_JWT_CA_FILE: late.caFile }),
    );
    try {
      // Once its token is had, only the keys are missing: /readyz says so (the stand-in's token
      // count is shared with earlier tests, so the answer itself is what is waited for).
      let last = { status: 0, text: '' };
      await waitFor(
        async () => {
          const readyz = await request(`${gateway.adminUrl}/readyz`);
          last = { status: readyz.statusCode, text: await readyz.body.text() };
          return last.text.includes('no caller keys yet');
        },
        15_000,
        '/readyz to say no caller keys yet',
      );
      expect(last.status).toBe(503);
      late.failing = false;
      // Retries back off from 1 s: generous for a loaded machine.
      await waitReady(gateway, 30_000);
    } finally {
      await gateway.stop();
      await late.close();
    }
  }, 45_000);

  it('refuses a FIFO as its bearer file at once, naming it, instead of waiting on it forever', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'caller-fifo-'));
    const fifo = join(dir, 'token');
    execFileSync('mkfifo', [fifo]);
    const gateway = await startSidecarProcess(gatewayEnv({ CALLER_JWT_BEARER_FILE: fifo }));
    try {
      let lastError: unknown;
      await waitFor(
        async () => {
          const status = await request(`${gateway.adminUrl}/status`);
          const body = (await status.body.json()) as { callers?: { lastError?: string } };
          lastError = body.callers?.lastError;
          return lastError !== undefined;
        },
        15_000,
        '/status callers.lastError to name the bearer file',
      );
      expect(lastError).toBe(`${fifo}: cannot read (is a FIFO (named pipe), not a regular file)`);
      const readyz = await request(`${gateway.adminUrl}/readyz`);
      expect(readyz.statusCode).toBe(503);
      expect(await readyz.body.text()).toContain('no caller keys yet');
    } finally {
      await gateway.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it('keeps verifying under the keys held once the JWKS server is gone', async () => {
    await issuer.close();
    const token = await mint(rsa, { sub: 'system:serviceaccount:apps:reports', jti: 'fresh' });
    const answer = await call('/v1.0/contracts/?m=outage', `Bearer ${token}`);
    expect(answer.status).toBe(200);
    expect((await request(`${sidecar.adminUrl}/readyz`)).statusCode).toBe(200);
  });

  it("never writes a caller's token to any output", async () => {
    // Stopped first: every held request line is flushed at exit.
    await sidecar.stop();
    const output = [...sidecar.stdout, ...sidecar.stderr].join('\n');
    expect(minted.length).toBeGreaterThan(20);
    for (const token of minted) {
      expect(output).not.toContain(token);
      // Nor its signature alone (the part only the caller's key could make).
      const signature = token.split('.')[2];
      if (signature !== undefined && signature.length > 20) expect(output).not.toContain(signature);
    }
  });
});
