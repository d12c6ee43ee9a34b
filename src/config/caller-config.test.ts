import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { loadConfig } from './load.js';

const GOOD = {
  UPSTREAM_BASE_URL: 'https://api.example.com',
  CLIENT_ID: 'the-id',
  CLIENT_SECRET: 'the-secret',
  UPSTREAM_PATH_PREFIXES: '/v1.0/,/beta/',
};
const JWT = { ...GOOD, CALLER_AUTH: 'jwt', CALLER_JWT_ISSUER: 'https://issuer.example' };

async function problemsOf(env: Record<string, string>): Promise<string[]> {
  const error = await loadConfig({ env }).then(
    () => undefined,
    (e: unknown) => e,
  );
  return error instanceof ConfigError ? [...error.problems] : [];
}

describe('callers configuration', () => {
  it('is off by default', async () => {
    expect((await loadConfig({ env: GOOD })).callers).toEqual({ auth: 'none' });
  });

  it('parses env rules: exact, prefix, methods and paths', async () => {
    const config = await loadConfig({
      env: {
        ...JWT,
        CALLER_RULES:
          'system:serviceaccount:apps:reports=Reports ; system:serviceaccount:research:*=research GET|head /v1.0/contracts/|/beta/',
      },
    });
    expect(config.callers).toEqual({
      auth: 'jwt',
      jwt: {
        issuer: 'https://issuer.example',
        audience: 'oauth-sidecar',
        keys: { kind: 'discovery' },
        caFile: undefined,
        bearerFile: undefined,
      },
      rules: [
        {
          subject: 'system:serviceaccount:apps:reports',
          match: 'exact',
          caller: 'reports',
          methods: undefined,
          paths: undefined,
        },
        {
          subject: 'system:serviceaccount:research:',
          match: 'prefix',
          caller: 'research',
          methods: ['GET', 'HEAD'],
          paths: ['/v1.0/contracts/', '/beta/'],
        },
      ],
    });
  });

  it('reports every rule problem at once, each with its position', async () => {
    const problems = await problemsOf({
      ...JWT,
      CALLER_RULES: 'a=ok;no-equals;b*c=x;d=bad/name;e=ok FETCH;f=ok GET /v2/;g=ok * relative/',
    });
    expect(problems).toEqual([
      expect.stringMatching(/^CALLER_RULES \(callers\.rules\): rule 2: must be SUBJECT=CALLER/),
      expect.stringMatching(/rule 3: the subject must be/),
      expect.stringMatching(/rule 4: the caller must be/),
      expect.stringMatching(/rule 5: methods must be/),
      expect.stringMatching(/rule 7: paths must be/),
    ]);
    // Once the rules parse, a path outside the forwarded prefixes is named with its rule.
    expect(await problemsOf({ ...JWT, CALLER_RULES: 'a=ok;f=ok GET /v2/' })).toEqual([
      expect.stringMatching(/rule 2 \(f=ok GET \/v2\/\): the path "\/v2\/" lies outside/),
    ]);
  });

  it('names QUOTA_CALLER_HEADER and CALLER_AUTH together, and a missing issuer', async () => {
    const problems = await problemsOf({
      ...GOOD,
      CALLER_AUTH: 'jwt',
      QUOTA_CALLER_HEADER: 'x-caller',
      CALLER_JWT_JWKS_URL: 'http://keys.example/jwks',
    });
    expect(problems).toEqual([
      expect.stringMatching(/^CALLER_JWT_JWKS_URL \(callers\.jwt\.jwksUrl\): must use https/),
      expect.stringMatching(/^QUOTA_CALLER_HEADER .*CALLER_AUTH \(callers\.auth\) is jwt/),
      expect.stringMatching(/^CALLER_JWT_ISSUER \(callers\.jwt\.issuer\): required/),
    ]);
  });

  it('takes a YAML-shaped list and one key source', async () => {
    const problems = await problemsOf({
      ...JWT,
      CALLER_JWT_JWKS_URL: 'https://issuer.example/keys',
      CALLER_JWT_JWKS_FILE: '/keys.json',
    });
    expect(problems).toEqual([expect.stringMatching(/keep one source of keys/)]);
    expect(await problemsOf({ ...GOOD, CALLER_RULES: 'a=b' })).toEqual([
      expect.stringMatching(/applies only with CALLER_AUTH \(callers\.auth\) jwt/),
    ]);
  });
});
