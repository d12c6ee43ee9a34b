import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { callersConfig, checkCallers } from './caller-config.js';
import { loadConfig } from './load.js';
import type { FieldKey, ResolvedValues } from './schema.js';
import type { CallerRule } from './types.js';

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

/** `checkCallers`' and `callersConfig`'s view of the settings: the given values, the rest unset. */
function getter(values: Partial<{ [K in FieldKey]: ResolvedValues[K] }>) {
  const all: Partial<Record<FieldKey, unknown>> = {
    'callers.auth': 'jwt',
    'callers.jwt.audience': 'oauth-sidecar',
    'callers.rules': [],
    'upstream.pathPrefixes': ['/v1.0/'],
    ...values,
  };
  return <K extends FieldKey>(key: K) => all[key] as ResolvedValues[K];
}

function check(
  values: Partial<{ [K in FieldKey]: ResolvedValues[K] }>,
  invalid: FieldKey[] = [],
): string[] {
  const problems: string[] = [];
  checkCallers(getter(values), new Set(invalid), problems);
  return problems;
}

const rule = (paths: string[] | undefined): CallerRule => ({
  subject: 'svc:a',
  match: 'exact',
  caller: 'a',
  methods: undefined,
  paths,
});

describe('checkCallers', () => {
  const issuer = 'https://issuer.example';

  it('finds nothing wrong with auth none and no jwt keys, or a complete jwt setup', () => {
    expect(check({ 'callers.auth': 'none' })).toEqual([]);
    expect(check({ 'callers.jwt.issuer': issuer, 'callers.rules': [rule(['/v1.0/x/'])] })).toEqual(
      [],
    );
  });

  it('names every jwt-only key set while auth is none, but not an empty rule list', () => {
    expect(
      check({
        'callers.auth': 'none',
        'callers.jwt.issuer': issuer,
        'callers.jwt.bearerFile': '/token',
        'callers.rules': [],
      }),
    ).toEqual([
      expect.stringMatching(/^CALLER_JWT_ISSUER .*applies only with CALLER_AUTH/),
      expect.stringMatching(/^CALLER_JWT_BEARER_FILE .*applies only with CALLER_AUTH/),
    ]);
  });

  it('says nothing more once callers.auth itself is invalid', () => {
    expect(
      check({ 'callers.auth': 'none', 'callers.jwt.issuer': issuer }, ['callers.auth']),
    ).toEqual([]);
  });

  it('does not ask for an issuer already reported invalid', () => {
    expect(check({}, ['callers.jwt.issuer'])).toEqual([]);
    expect(check({})).toEqual([expect.stringMatching(/CALLER_JWT_ISSUER .*required/)]);
  });

  it('refuses the TLS settings beside a mounted JWKS file', () => {
    expect(
      check({
        'callers.jwt.issuer': issuer,
        'callers.jwt.jwksFile': '/keys.json',
        'callers.jwt.caFile': '/ca.pem',
        'callers.jwt.bearerFile': '/token',
      }),
    ).toEqual([
      expect.stringMatching(/^CALLER_JWT_CA_FILE .*not to CALLER_JWT_JWKS_FILE/),
      expect.stringMatching(/^CALLER_JWT_BEARER_FILE .*not to CALLER_JWT_JWKS_FILE/),
    ]);
  });

  it('names each rule path outside the forwarded prefixes, unless the prefixes are invalid', () => {
    const values = {
      'callers.jwt.issuer': issuer,
      'callers.rules': [rule(['/v1.0/ok/', '/v2/']), rule(undefined), rule(['/admin/'])],
    };
    expect(check(values)).toEqual([
      expect.stringMatching(
        /rule 1 \(svc:a=a \* \/v1\.0\/ok\/\|\/v2\/\): the path "\/v2\/" lies outside/,
      ),
      expect.stringMatching(
        /rule 3 .*the path "\/admin\/" lies outside every forwarded prefix \(\/v1\.0\/\)/,
      ),
    ]);
    expect(check(values, ['upstream.pathPrefixes'])).toEqual([]);
  });
});

describe('callersConfig', () => {
  const base = { 'callers.jwt.issuer': 'https://issuer.example' } as const;

  it('is auth none alone when off', () => {
    expect(callersConfig(getter({ 'callers.auth': 'none', ...base }))).toEqual({ auth: 'none' });
  });

  it('takes the keys from the file, else the URL, else discovery', () => {
    const keysOf = (values: Parameters<typeof getter>[0]) => {
      const config = callersConfig(getter({ ...base, ...values }));
      return config.auth === 'jwt' ? config.jwt.keys : undefined;
    };
    expect(keysOf({ 'callers.jwt.jwksFile': '/k.json' })).toEqual({
      kind: 'file',
      file: '/k.json',
    });
    expect(keysOf({ 'callers.jwt.jwksUrl': 'https://k/' })).toEqual({
      kind: 'url',
      url: 'https://k/',
    });
    expect(keysOf({})).toEqual({ kind: 'discovery' });
  });

  it('carries the issuer, audience, TLS files and rules', () => {
    const rules = [rule(undefined)];
    expect(
      callersConfig(getter({ ...base, 'callers.jwt.caFile': '/ca.pem', 'callers.rules': rules })),
    ).toEqual({
      auth: 'jwt',
      jwt: {
        issuer: 'https://issuer.example',
        audience: 'oauth-sidecar',
        keys: { kind: 'discovery' },
        caFile: '/ca.pem',
        bearerFile: undefined,
      },
      rules,
    });
  });
});
