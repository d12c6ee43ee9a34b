import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { loadConfig } from './load.js';
import { FIELDS } from './schema.js';
import {
  KNOWN_VARIABLES,
  SETTING_PREFIXES,
  hasServiceLinkName,
  isServiceLink,
  unknownSettings,
} from './unknown-settings.js';

const GOOD = {
  UPSTREAM_BASE_URL: 'https://api.example.com',
  CLIENT_ID: 'the-id',
  CLIENT_SECRET: 'the-secret',
};

const suggestionFor = (name: string): string | undefined =>
  unknownSettings({ [name]: 'x' })[0]?.suggestion;

describe('unknown settings: which variables are named', () => {
  it('knows every variable of the schema, aliases included, so a new key is known at once', () => {
    for (const spec of Object.values(FIELDS)) expect(KNOWN_VARIABLES.has(spec.env)).toBe(true);
    expect(KNOWN_VARIABLES.has('TOKEN_STORE_URL')).toBe(true);
    const settings = Object.fromEntries([...KNOWN_VARIABLES].map((name) => [name, '1']));
    expect(unknownSettings(settings)).toEqual([]);
  });

  it('names a variable with a setting prefix that is no setting, with the nearest setting', () => {
    expect(suggestionFor('CACHE_RULE')).toBe('CACHE_RULES');
    expect(suggestionFor('UPSTREAM_TIMEOUT')).toBe('UPSTREAM_TIMEOUT_MS');
    expect(suggestionFor('UPSTREAM_BASEURL')).toBe('UPSTREAM_BASE_URL');
    expect(suggestionFor('TOKEN_REFRESH_MARGIN')).toBe('TOKEN_REFRESH_MARGIN_SECONDS');
    expect(suggestionFor('CLIENT_SECRT')).toBe('CLIENT_SECRET');
    expect(suggestionFor('LOG_FORMAT')).toBeUndefined();
  });

  it('leaves alone variables without a setting prefix, empty ones, and OpenTelemetry ones', () => {
    expect(
      unknownSettings({ HOME: '/root', OTEL_FOO: '1', CACHE_RULE: '', NODE_OPTIONS: '' }),
    ).toEqual([]);
    expect(unknownSettings({ B_X: '1', STORE_URI: 'x', CACHE_RULE: 'y' })).toEqual([
      { name: 'CACHE_RULE', suggestion: 'CACHE_RULES' },
      { name: 'STORE_URI', suggestion: 'STORE_URL' },
    ]);
  });

  it('every prefix is the prefix of a setting', () => {
    for (const prefix of SETTING_PREFIXES) {
      expect(
        [...KNOWN_VARIABLES].some((name) => name.startsWith(prefix)),
        prefix,
      ).toBe(true);
    }
  });
});

describe('unknown settings: Kubernetes service links', () => {
  // What the kubelet injects for Services named proxy, admin and cache-redis in the namespace.
  const links = {
    PROXY_SERVICE_HOST: '10.96.0.7',
    PROXY_SERVICE_PORT: '8080',
    PROXY_SERVICE_PORT_HTTP: '8080',
    PROXY_PORT: 'tcp://10.96.0.7:8080',
    PROXY_PORT_8080_TCP: 'tcp://10.96.0.7:8080',
    PROXY_PORT_8080_TCP_PROTO: 'tcp',
    PROXY_PORT_8080_TCP_PORT: '8080',
    PROXY_PORT_8080_TCP_ADDR: '10.96.0.7',
    ADMIN_SERVICE_HOST: 'fd00::7',
    CACHE_REDIS_PORT_6379_UDP: 'udp://10.96.0.9:6379',
  };

  it('are not named: every pod of the namespace gets them', () => {
    expect(unknownSettings(links)).toEqual([]);
  });

  it('a service-link name with a value of another shape is named (PROXY_PORT=8081 is a typo)', () => {
    expect(isServiceLink('PROXY_PORT', '8081')).toBe(false);
    expect(unknownSettings({ PROXY_PORT: '8081', ADMIN_SERVICE_HOST: 'localhost' })).toEqual([
      { name: 'ADMIN_SERVICE_HOST', suggestion: undefined },
      { name: 'PROXY_PORT', suggestion: undefined },
    ]);
  });

  it('no setting has the shape of a service link, so none is ever skipped', () => {
    const clashes = [...KNOWN_VARIABLES].filter(hasServiceLinkName);
    expect(clashes).toEqual([]);
  });
});

describe('unknown settings: warning or error', () => {
  it('a warning by default: the configuration loads and carries it, without the value', async () => {
    const config = await loadConfig({ env: { ...GOOD, CACHE_RULE: '/v1.0/contracts/=60' } });
    expect(config.cache.rules).toEqual([]);
    expect(config.warnings).toEqual([
      'CACHE_RULE: not a setting, did you mean CACHE_RULES? (docs/configuration.md)',
    ]);
  });

  it('an error with STRICT_CONFIG=true, listed with the other problems', async () => {
    const error = await loadConfig({
      env: { ...GOOD, STRICT_CONFIG: 'true', CACHE_RULE: 'x', UPSTREAM_TIMEOUT_MS: 'abc' },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toContain(
      'CACHE_RULE: not a setting, did you mean CACHE_RULES? (docs/configuration.md)',
    );
    expect(problems.some((p) => p.startsWith('UPSTREAM_TIMEOUT_MS'))).toBe(true);
  });

  it('YAML strictConfig: true makes it an error too, and the environment overrides the file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oauth-sidecar-strict-'));
    try {
      const configFile = join(dir, 'strict.yaml');
      await writeFile(configFile, 'strictConfig: true\n');
      const env = { ...GOOD, UPSTREAM_BASEURL: 'https://x' };
      await expect(loadConfig({ env, configFile })).rejects.toThrow(ConfigError);
      const relaxed = await loadConfig({ env: { ...env, STRICT_CONFIG: 'false' }, configFile });
      expect(relaxed.warnings).toHaveLength(1);
      await writeFile(configFile, 'strictConfg: true\n');
      const typo = await loadConfig({ env: GOOD, configFile }).catch((e: unknown) => e);
      expect((typo as ConfigError).problems[0]).toContain('did you mean strictConfig?');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
