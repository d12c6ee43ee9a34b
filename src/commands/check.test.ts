import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeTemp } from '../../test/helpers/sidecar-process.js';
import { loadConfig } from '../config/load.js';
import type { Config } from '../config/types.js';
import { TokenEndpointError } from '../errors.js';
import { startStandin, type Standin } from '../standin/index.js';
import type { GrantRequest, TokenEndpoint, TokenSet } from '../token/types.js';
import { check, checkOffline, runCheck } from './check.js';

const SECRET = 'check-secret-a81e';
const ACCESS = 'at_check-access-token';
const REFRESH = 'rt_check-refresh-token';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: { out: (l: string) => void out.push(l), err: (l: string) => void err.push(l) },
  };
}

function endpoint(answer: () => Promise<TokenSet>): TokenEndpoint & { requests: GrantRequest[] } {
  const requests: GrantRequest[] = [];
  return {
    requests,
    requestToken: (request) => {
      requests.push(request);
      return answer();
    },
  };
}

const SET: TokenSet = {
  accessToken: ACCESS,
  tokenType: 'bearer',
  expiresInSeconds: 1799,
  lifetimeDefaulted: false,
  refreshToken: REFRESH,
};

let inline: Config;
beforeAll(async () => {
  inline = await loadConfig({
    env: {
      UPSTREAM_BASE_URL: 'https://api.example.com',
      CLIENT_ID: 'check-client',
      CLIENT_SECRET: SECRET,
      CACHE_RULES: '/v1.0/=60',
    },
  });
});

describe('runCheck', () => {
  it('asks for one client-credentials token and prints what came back, never the token', async () => {
    const { out, err, io: lines } = io();
    const client = endpoint(() => Promise.resolve(SET));
    expect(await runCheck(inline, lines, { endpoint: client })).toBe(0);
    expect(client.requests).toEqual([
      {
        grant: 'client_credentials',
        credentials: { clientId: 'check-client', clientSecret: SECRET },
      },
    ]);
    expect(out).toEqual([
      expect.stringMatching(/^features: cache rules: /),
      'token endpoint: https://api.example.com/oauth/token/',
      'grant: client_credentials',
      'token type: Bearer',
      'expires in: 1799 s',
      'refresh token: yes',
    ]);
    expect(err).toEqual([]);
    for (const secret of [ACCESS, REFRESH, SECRET]) expect(out.join('\n')).not.toContain(secret);
  });

  it('says when the lifetime was assumed and when no refresh token came', async () => {
    const { out, io: lines } = io();
    const set = { ...SET, lifetimeDefaulted: true, refreshToken: null };
    await runCheck(inline, lines, { endpoint: endpoint(() => Promise.resolve(set)) });
    expect(out).toContain('expires in: 1799 s (no expiresIn in the answer: default assumed)');
    expect(out).toContain('refresh token: no');
  });

  it('a refused request is exit 1 with the reason on stderr', async () => {
    const { out, err, io: lines } = io();
    const refused = endpoint(() =>
      Promise.reject(
        new TokenEndpointError('rejected', 'token endpoint answered 401 invalid_client'),
      ),
    );
    expect(
      await runCheck({ ...inline, warnings: ['a warning'] }, lines, { endpoint: refused }),
    ).toBe(1);
    expect(err).toEqual([
      'warning: a warning',
      'oauth-sidecar check: failed: token endpoint answered 401 invalid_client',
    ]);
    expect(out).toHaveLength(1);
  });

  it('with a store, its failure fails the check; without one it is not asked', async () => {
    const withStore = { ...inline, store: { ...inline.store, url: 'redis://redis:6379' } };
    const asked: unknown[] = [];
    const failing = {
      endpoint: endpoint(() => Promise.resolve(SET)),
      checkStore: (credentials: unknown) => {
        asked.push(credentials);
        return Promise.resolve('redis://redis:6379: NOAUTH');
      },
    };
    const { err, io: lines } = io();
    expect(await runCheck(withStore, lines, failing)).toBe(1);
    expect(err).toEqual(['oauth-sidecar check: failed: store: redis://redis:6379: NOAUTH']);
    expect(await runCheck(inline, io().io, failing)).toBe(0);
    expect(asked).toHaveLength(1);
  });
});

describe('checkOffline', () => {
  it('prints the features, the files not checked and ok, contacting nothing', () => {
    const { out, err, io: lines } = io();
    expect(
      checkOffline({ ...inline, warnings: ['w'] }, ['CLIENT_SECRET_FILE: /s: not checked'], lines),
    ).toBe(0);
    expect(err).toEqual(['warning: w']);
    expect(out.slice(1)).toEqual([
      'not checked: CLIENT_SECRET_FILE: /s: not checked',
      'configuration: ok (offline: no token requested, nothing contacted)',
    ]);
  });
});

describe('check against the stand-in', () => {
  let standin: Standin;
  let caFile: string;
  beforeAll(async () => {
    standin = await startStandin({ clientId: 'check-client', clientSecret: SECRET });
    caFile = writeTemp('check-ca.pem', standin.caCert);
  });
  afterAll(() => standin.close());

  const configFor = (secret: string): Promise<Config> =>
    loadConfig({
      env: {
        UPSTREAM_BASE_URL: standin.url,
        UPSTREAM_CA_FILE: caFile,
        CLIENT_ID: 'check-client',
        CLIENT_SECRET: secret,
      },
    });

  it('gets a token over HTTPS from the configured endpoint and prints none of it', async () => {
    const { out, err, io: lines } = io();
    expect(await check(await configFor(SECRET), lines)).toBe(0);
    expect(err).toEqual([]);
    expect(out).toContain(`token endpoint: ${standin.url}/oauth/token/`);
    expect(standin.tokenRequests.at(-1)).toMatchObject({ outcome: 'issued', secretOk: true });
    const printed = out.join('\n');
    for (const secret of [SECRET, ...standin.issuedTokens()]) expect(printed).not.toContain(secret);
  });

  it('a wrong secret is exit 1, and the message does not repeat it', async () => {
    const { err, io: lines } = io();
    expect(await check(await configFor('wrong-secret-value'), lines)).toBe(1);
    expect(err).toEqual([expect.stringMatching(/^oauth-sidecar check: failed: .*401/)]);
    expect(err.join('')).not.toContain('wrong-secret-value');
  });
});
