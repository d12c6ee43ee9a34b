import { describe, expect, it } from 'vitest';
import { DEMO_CALLER_RULES, callerHeader, demoEnv } from './demo.js';

const URL = 'https://127.0.0.1:4443';
const VARIABLES = ['UPSTREAM_BASE_URL', 'CLIENT_ID', 'CACHE_RULES', 'CALLER_AUTH', 'CALLER_RULES'];
const CALLERS = { caFile: '/tmp/d/ca.pem', tokenFile: '/tmp/d/caller-token' };

describe('demoEnv', () => {
  it('without caller identity sets no CALLER_ variable', () => {
    const { env } = demoEnv({ CACHE_RULES: '/v1.0/=60' }, URL, VARIABLES);
    expect(Object.keys(env).filter((name) => name.startsWith('CALLER_'))).toEqual([]);
    expect(env.CACHE_RULES).toBe('/v1.0/=60');
  });

  it('with CALLER_AUTH=jwt makes the stand-in the issuer, keeps the rules asked for, ignores another issuer', () => {
    const asked = {
      CALLER_AUTH: 'jwt',
      CALLER_JWT_ISSUER: 'https://elsewhere.example',
      CALLER_JWT_JWKS_URL: 'https://elsewhere.example/jwks',
    };
    const variables = [...VARIABLES, 'CALLER_JWT_ISSUER', 'CALLER_JWT_JWKS_URL'];
    const { env, ignored } = demoEnv(asked, URL, variables, CALLERS);
    expect(env).toMatchObject({
      CALLER_AUTH: 'jwt',
      CALLER_JWT_ISSUER: URL,
      CALLER_JWT_CA_FILE: CALLERS.caFile,
      CALLER_RULES: DEMO_CALLER_RULES,
    });
    expect(env.CALLER_JWT_JWKS_URL).toBeUndefined();
    expect(ignored).toEqual(['CALLER_JWT_ISSUER', 'CALLER_JWT_JWKS_URL']);
    const own = demoEnv({ ...asked, CALLER_RULES: 'team:*=team' }, URL, VARIABLES, CALLERS);
    expect(own.env.CALLER_RULES).toBe('team:*=team');
  });

  it('the banner curl reads the token file at each call', () => {
    expect(callerHeader(undefined)).toBe('');
    expect(callerHeader(CALLERS)).toBe('-H "Authorization: Bearer $(cat /tmp/d/caller-token)" ');
  });
});
