import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { featureLine, featuresInEffect } from './features.js';
import { loadConfig } from './load.js';

const GOOD = {
  UPSTREAM_BASE_URL: 'https://api.example.com',
  CLIENT_ID: 'the-id',
  CLIENT_SECRET: 'the-secret',
};

describe('features in effect', () => {
  it('all off by default', async () => {
    const config = await loadConfig({ env: GOOD });
    expect(featureLine(config)).toBe(
      'cache rules: off; rate limit: off; callers: all as "default"; store: off; tracing: off; egress proxy: off',
    );
  });

  it('names each feature set, without the store password or the tracing headers', async () => {
    const config = await loadConfig({
      env: {
        ...GOOD,
        CACHE_RULES: '/v1.0/contracts/=60,/v1.0/x/=5',
        UPSTREAM_RATE_LIMIT: '2/m',
        QUOTA_CALLER: 'billing',
        QUOTA_CALLER_HEADER: 'x-caller',
        QUOTA_CALLERS: 'billing=3,reports=1:batch',
        STORE_URL: 'rediss://user:s3cret-pw@redis.internal:6380/0',
        CACHE_SHARED: 'true',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.internal:4318/base',
        OTEL_EXPORTER_OTLP_HEADERS: 'api-key=h3ader-secret',
        HTTPS_PROXY: 'http://proxy-user:pr0xy-pw@proxy.corp:3128',
        NO_PROXY: 'api.example.com',
        TOKEN_URL: 'https://auth.example.com/oauth/token/',
      },
    });
    expect(featuresInEffect(config)).toEqual({
      cache: '/v1.0/contracts/=60s, /v1.0/x/=5s (shared)',
      rateLimit: '2/m (queue 2000 ms)',
      callers: 'by header x-caller, else "billing", weighted billing=3 reports=1:batch',
      store: 'rediss://user@redis.internal:6380/0',
      tracing: 'https://otel.internal:4318 (http/protobuf, parentbased_always_on)',
      egressProxy: 'http://***@proxy.corp:3128 (api direct, token endpoint through it)',
    });
    const line = featureLine(config);
    expect(line).not.toContain('s3cret-pw');
    expect(line).not.toContain('h3ader-secret');
    expect(line).not.toContain('pr0xy-pw');
  });
});

describe('the features line as the docs quote it', () => {
  const doc = (path: string): string =>
    readFileSync(join(import.meta.dirname, '..', '..', path), 'utf8').replace(/\s+/g, ' ');

  it('docs/configuration.md quotes the default line as the code prints it', async () => {
    const line = `features in effect: ${featureLine(await loadConfig({ env: GOOD }))}`;
    expect(doc('docs/configuration.md').includes(`\`${line}\``), line).toBe(true);
  });

  it("docs/reference.md's template names every item, in the code's order", async () => {
    const labels = featureLine(await loadConfig({ env: GOOD }))
      .split('; ')
      .map((item) => item.slice(0, item.indexOf(': ')));
    expect(labels).toHaveLength(
      Object.keys(featuresInEffect(await loadConfig({ env: GOOD }))).length,
    );
    const template = labels.map((label) => `${label}: …`).join('; ');
    const quoted = `\`features in effect: ${template}\``;
    expect(doc('docs/reference.md').includes(quoted), quoted).toBe(true);
  });

  it('docs/reference.md quotes the callers item of CALLER_AUTH=jwt as the code prints it', async () => {
    const config = await loadConfig({
      env: {
        ...GOOD,
        CALLER_AUTH: 'jwt',
        CALLER_JWT_ISSUER: 'https://kubernetes.default.svc.cluster.local',
        CALLER_JWT_JWKS_URL: 'https://kubernetes.default.svc/openid/v1/jwks',
        CALLER_RULES:
          'system:serviceaccount:billing:app=billing;system:serviceaccount:research:*=research GET;x=y',
      },
    });
    const item = `\`${featuresInEffect(config).callers}\``;
    expect(doc('docs/reference.md').includes(item), item).toBe(true);
  });
});
