import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import pino from 'pino';
import { MockAgent } from 'undici';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import type { CallerJwtConfig, CallerRule } from '../config/types.js';
import { SidecarError } from '../errors.js';
import type { ExchangeView } from '../proxy/stages.js';
import { FILE_REFRESH_MS, startCallerAuth, type CallerAuth } from './index.js';
import type { CallerAuthResult } from './stage.js';

const ISSUER = 'https://issuer.test';
const logger = pino({ level: 'silent' });
const RULES: CallerRule[] = [
  { subject: 'svc:', match: 'prefix', caller: 'apps', methods: undefined, paths: undefined },
];

interface Signer {
  jwk: JWK;
  sign(sub: string): Promise<string>;
}

async function signer(kid: string): Promise<Signer> {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
  return {
    jwk,
    sign: (sub) => {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: ISSUER, aud: 'oauth-sidecar', sub, iat: now, exp: now + 3600 })
        .setProtectedHeader({ alg: 'ES256', kid })
        .sign(privateKey);
    },
  };
}

function exchange(token: string) {
  return {
    req: { headers: { authorization: `Bearer ${token}` } },
    method: 'GET',
    target: '/v1.0/x',
  } as unknown as ExchangeView;
}

/** The stage's verdict: the caller it named, or the refusal's code. */
async function judge(auth: CallerAuth, token: string): Promise<string | undefined> {
  const ex = exchange(token);
  try {
    await auth.stage.beforeUpstream!(ex);
    return ex.caller;
  } catch (error) {
    if (error instanceof SidecarError) return error.code;
    throw error;
  }
}

let first: Signer;
let second: Signer;
beforeAll(async () => {
  first = await signer('k1');
  second = await signer('k2');
});

// Only timers and Date: jose's crypto and the promise queue run for real.
beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] }));
afterEach(() => vi.useRealTimers());

describe('startCallerAuth', () => {
  it('puts a mounted key set on the request path, re-read every FILE_REFRESH_MS', async () => {
    let file = JSON.stringify({ keys: [first.jwk] });
    const reads: string[] = [];
    const counted: CallerAuthResult[] = [];
    const handedKeys: unknown[] = [];
    const jwt: CallerJwtConfig = {
      issuer: ISSUER,
      audience: 'oauth-sidecar',
      keys: { kind: 'file', file: '/keys/jwks.json' },
      caFile: undefined,
      bearerFile: undefined,
    };
    const auth = startCallerAuth(
      { jwt, rules: RULES },
      {
        dispatcher: undefined,
        readFile: (path) => {
          reads.push(path);
          return Promise.resolve(file);
        },
        clock: systemClock,
        logger,
        counts: (keys) => {
          handedKeys.push(keys);
          return { count: (result) => counted.push(result) };
        },
      },
    );
    // The first fetch is under way, not yet done.
    expect(auth.ready()).toBe(false);
    await vi.advanceTimersByTimeAsync(0);
    expect(auth.ready()).toBe(true);
    expect(reads).toEqual(['/keys/jwks.json']);
    expect(auth.status()).toMatchObject({ source: '/keys/jwks.json', kids: ['k1'], rules: 1 });
    expect(handedKeys).toHaveLength(1);

    const oldToken = await first.sign('svc:reports');
    expect(await judge(auth, oldToken)).toBe('apps');
    expect(await judge(auth, oldToken)).toBe('apps');
    expect(await judge(auth, await first.sign('user:someone'))).toBe('caller_forbidden');
    expect(counted).toEqual(['verified', 'remembered', 'forbidden']);

    // The key is rotated in the file: seen at the next refresh, and the remembered token is forgotten.
    file = JSON.stringify({ keys: [second.jwk] });
    await vi.advanceTimersByTimeAsync(FILE_REFRESH_MS - 1);
    expect(reads).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(reads).toHaveLength(2);
    expect(auth.status().kids).toEqual(['k2']);
    expect(await judge(auth, oldToken)).toBe('caller_unauthenticated');
    expect(await judge(auth, await second.sign('svc:reports'))).toBe('apps');

    auth.stop();
    await vi.advanceTimersByTimeAsync(10 * FILE_REFRESH_MS);
    expect(reads).toHaveLength(2);
  });

  it('fetches a JWKS URL through the dispatcher it is given', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    agent
      .get('https://keys.test')
      .intercept({ path: '/jwks', method: 'GET' })
      .reply(200, JSON.stringify({ keys: [first.jwk] }));
    const auth = startCallerAuth(
      {
        jwt: {
          issuer: ISSUER,
          audience: 'oauth-sidecar',
          keys: { kind: 'url', url: 'https://keys.test/jwks' },
          caFile: undefined,
          bearerFile: undefined,
        },
        rules: RULES,
      },
      {
        dispatcher: agent,
        readFile: () => Promise.reject(new Error('no file expected')),
        clock: systemClock,
        logger,
        counts: () => ({ count: () => undefined }),
      },
    );
    try {
      await vi.waitFor(() => expect(auth.ready()).toBe(true));
      expect(auth.status()).toMatchObject({ source: 'https://keys.test/jwks', kids: ['k1'] });
      expect(await judge(auth, await first.sign('svc:a'))).toBe('apps');
    } finally {
      auth.stop();
      await agent.close();
    }
  });
});
