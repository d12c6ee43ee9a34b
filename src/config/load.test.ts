import { mkdtemp, readFile, rm, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { formatConfigProblems, loadConfig, type LoadConfigOptions } from './load.js';
import { permissionDenied, readFailure } from './credentials.js';
import { FIELDS } from './schema.js';
import { createTestPki } from '../standin/index.js';
import { USAGE } from '../cli.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oauth-sidecar-config-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const INLINE = { CLIENT_ID: 'the-id', CLIENT_SECRET: 'the-secret' };
const GOOD = { UPSTREAM_BASE_URL: 'https://api.example.com', ...INLINE };
const SOURCES =
  'CLIENT_ID + CLIENT_SECRET, CLIENT_ID_FILE + CLIENT_SECRET_FILE, or CLIENT_CREDENTIALS_CSV (credentials.*)';

/** Write a file in the test's tmp dir and return its path. */
async function file(name: string, content: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content);
  return path;
}

async function problemsOf(options: LoadConfigOptions): Promise<string[]> {
  const error = await loadConfig(options).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  return [...(error as ConfigError).problems];
}

async function problemsFromEnv(env: Record<string, string | undefined>): Promise<string[]> {
  return problemsOf({ env });
}

async function problemsFromYaml(yaml: string, env: Record<string, string> = {}): Promise<string[]> {
  return problemsOf({ env, configFile: await file('config.yaml', yaml) });
}

describe('loadConfig: defaults and precedence', () => {
  it('fills every default from the FIELDS table', async () => {
    const config = await loadConfig({ env: GOOD });
    expect(config).toEqual({
      upstream: {
        baseUrl: 'https://api.example.com',
        pathPrefixes: ['/v1.0/'],
        caFile: undefined,
        timeoutMs: FIELDS['upstream.timeoutMs'].default,
        allowInsecureHttp: false,
        http2: false,
        maxConnections: 64,
        bodyTimeoutMs: 30_000,
        rateLimit: undefined,
        queueMs: 2_000,
        maxCooldownSeconds: 300,
      },
      token: {
        url: 'https://api.example.com/oauth/token/',
        format: 'json',
        clientAuth: 'body',
        scopes: [],
        timeoutMs: 10_000,
        waitMs: 5_000,
        refreshMarginSeconds: 60,
        refreshFraction: 0.2,
        recoveryBackoffCapMs: 8_000,
      },
      store: {
        url: undefined,
        mode: 'standalone',
        keyPrefix: 'oauth-sidecar:',
        healthCheckIntervalMs: 2_000,
      },
      credentials: { source: 'inline', clientId: 'the-id', clientSecret: 'the-secret' },
      proxy: {
        listen: { host: '127.0.0.1', port: 8080 },
        http2: false,
        maxInFlight: 512,
        maxPipelined: 8,
        maxHeaders: 100,
        bodyTimeoutMs: 30_000,
        minBodyBytesPerSecond: 500,
      },
      admin: { listen: { host: '0.0.0.0', port: 9090 } },
      log: { level: 'info' },
      cache: {
        rules: [],
        maxBytes: 64 * 1024 * 1024,
        maxEntryBytes: 1024 * 1024,
        maxEntries: 10_000,
        shared: false,
        maxSharedEntryBytes: 256 * 1024,
        staleIfErrorSeconds: 3_600,
        staleWhileRevalidateSeconds: 0,
      },
      quota: { caller: 'default', callerHeader: undefined, callers: [] },
      callers: { auth: 'none' },
      egress: { proxy: undefined, httpProxy: undefined, noProxy: [] },
    });
  });

  it('hands out a fresh copy of a default, so one config cannot change the next', async () => {
    const first = await loadConfig({ env: GOOD });
    first.upstream.pathPrefixes.push('/mutated/');
    first.proxy.listen.port = 1;
    const second = await loadConfig({ env: GOOD });
    expect(second.upstream.pathPrefixes).toEqual(['/v1.0/']);
    expect(second.proxy.listen.port).toBe(8080);
  });

  it('takes the file over the defaults and the environment over the file, key by key', async () => {
    const configFile = await file(
      'config.yaml',
      [
        'upstream:',
        '  baseUrl: https://from-file.example.com',
        '  timeoutMs: 1234',
        'token:',
        '  waitMs: 777',
        '  format: form',
        'log:',
        '  level: debug',
      ].join('\n'),
    );
    const config = await loadConfig({
      configFile,
      env: { ...INLINE, UPSTREAM_TIMEOUT_MS: '4321', LOG_LEVEL: 'warn', TOKEN_WAIT_MS: '' },
    });
    expect(config.upstream.baseUrl).toBe('https://from-file.example.com'); // file over default
    expect(config.upstream.timeoutMs).toBe(4321); // env over file
    expect(config.log.level).toBe('warn'); // env over file
    expect(config.token.format).toBe('form'); // file only
    expect(config.token.waitMs).toBe(777); // an empty variable counts as unset
    expect(config.token.refreshFraction).toBe(0.2); // default
  });

  it('parses every key from the environment', async () => {
    const config = await loadConfig({
      env: {
        ...GOOD,
        UPSTREAM_BASE_URL: 'https://api.example.com:8443/',
        UPSTREAM_PATH_PREFIXES: ' /v1.0/ , /beta,, /v1.0/',
        UPSTREAM_TIMEOUT_MS: '1',
        UPSTREAM_ALLOW_INSECURE_HTTP: 'no',
        UPSTREAM_HTTP2: 'YES',
        TOKEN_URL: 'https://auth.example.com/o/token/',
        TOKEN_REQUEST_FORMAT: 'FORM',
        TOKEN_CLIENT_AUTH: 'basic',
        TOKEN_SCOPES: ' read , write ,',
        TOKEN_TIMEOUT_MS: '600000',
        TOKEN_WAIT_MS: '0',
        TOKEN_REFRESH_MARGIN_SECONDS: '86400',
        TOKEN_REFRESH_FRACTION: '0.5',
        TOKEN_RECOVERY_BACKOFF_CAP_MS: '60000',
        PROXY_LISTEN: ':8081',
        PROXY_HTTP2: '1',
        ADMIN_LISTEN: '[::1]:0',
        LOG_LEVEL: 'silent',
        UPSTREAM_MAX_CONNECTIONS: '2',
        UPSTREAM_BODY_TIMEOUT_MS: '1500',
        UPSTREAM_RATE_LIMIT: '500/h',
        UPSTREAM_QUEUE_MS: '0',
        UPSTREAM_MAX_COOLDOWN_SECONDS: '60',
        TOKEN_STORE_URL: 'rediss://user:pw@redis.example:6380/2',
        TOKEN_STORE_KEY_PREFIX: 'team-a:',
        STORE_HEALTH_CHECK_INTERVAL_MS: '10000',
        PROXY_MAX_IN_FLIGHT: '10',
        PROXY_MAX_PIPELINED: '1',
        PROXY_MAX_HEADERS: '50',
        PROXY_BODY_TIMEOUT_MS: '2000',
        PROXY_MIN_BODY_BYTES_PER_SECOND: '0',
        CACHE_RULES: '/v1.0/contracts/=300, /beta/releases=60',
        CACHE_MAX_BYTES: '1048576',
        CACHE_MAX_ENTRY_BYTES: '65536',
        CACHE_MAX_ENTRIES: '500',
        CACHE_SHARED: 'true',
        CACHE_MAX_SHARED_ENTRY_BYTES: '4096',
        CACHE_STALE_IF_ERROR_SECONDS: '0',
        CACHE_STALE_WHILE_REVALIDATE_SECONDS: '30',
      },
    });
    expect(config.upstream).toEqual({
      baseUrl: 'https://api.example.com:8443',
      pathPrefixes: ['/v1.0/', '/beta/'],
      caFile: undefined,
      timeoutMs: 1,
      allowInsecureHttp: false,
      http2: true,
      maxConnections: 2,
      bodyTimeoutMs: 1500,
      rateLimit: { count: 500, periodMs: 3_600_000 },
      queueMs: 0,
      maxCooldownSeconds: 60,
    });
    expect(config.cache).toEqual({
      rules: [
        { prefix: '/v1.0/contracts/', ttlSeconds: 300 },
        { prefix: '/beta/releases', ttlSeconds: 60 },
      ],
      maxBytes: 1_048_576,
      maxEntryBytes: 65_536,
      maxEntries: 500,
      shared: true,
      maxSharedEntryBytes: 4_096,
      staleIfErrorSeconds: 0,
      staleWhileRevalidateSeconds: 30,
    });
    expect(config.token).toEqual({
      url: 'https://auth.example.com/o/token/',
      format: 'form',
      clientAuth: 'basic',
      scopes: ['read', 'write'],
      timeoutMs: 600_000,
      waitMs: 0,
      refreshMarginSeconds: 86_400,
      refreshFraction: 0.5,
      recoveryBackoffCapMs: 60_000,
    });
    expect(config.store).toEqual({
      url: 'rediss://user:pw@redis.example:6380/2',
      mode: 'standalone',
      keyPrefix: 'team-a:',
      healthCheckIntervalMs: 10_000,
    });
    // The store URL's password never shows when the config is logged or inspected.
    expect(JSON.stringify(config.store)).not.toContain('pw');
    expect(inspect(config.store)).not.toContain('pw');
    expect(config.proxy).toEqual({
      listen: { host: '0.0.0.0', port: 8081 },
      http2: true,
      maxInFlight: 10,
      maxPipelined: 1,
      maxHeaders: 50,
      bodyTimeoutMs: 2000,
      minBodyBytesPerSecond: 0,
    });
    expect(config.admin.listen).toEqual({ host: '::1', port: 0 });
    expect(config.log.level).toBe('silent');
  });

  it('reads nested YAML sections (token.store) and YAML cache rules', async () => {
    const configFile = await file(
      'nested.yaml',
      [
        'upstream: { baseUrl: https://api.example.com }',
        'token:',
        '  store:',
        '    url: redis://127.0.0.1:6379',
        '    keyPrefix: "x:"',
        'cache:',
        '  rules:',
        '    - { prefix: /v1.0/contracts/, ttlSeconds: 30 }',
        '    - /v1.0/releases/=5',
      ].join('\n'),
    );
    const config = await loadConfig({ env: INLINE, configFile });
    expect(config.store).toEqual({
      url: 'redis://127.0.0.1:6379',
      mode: 'standalone',
      keyPrefix: 'x:',
      healthCheckIntervalMs: 2_000,
    });
    expect(config.cache.rules).toEqual([
      { prefix: '/v1.0/contracts/', ttlSeconds: 30 },
      { prefix: '/v1.0/releases/', ttlSeconds: 5 },
    ]);
    expect(await problemsFromYaml('token:\n  store:\n    urll: redis://x\n', GOOD)).toEqual([
      `token.store.urll: unknown key (in ${join(dir, 'config.yaml')}), did you mean token.store.url?`,
    ]);
  });

  it('takes STORE_URL and store.* as the canonical names, TOKEN_STORE_* as aliases, never both', async () => {
    const canonical = await loadConfig({
      env: { ...GOOD, STORE_URL: 'redis://a:6379', STORE_KEY_PREFIX: 'a:' },
    });
    expect(canonical.store).toEqual({
      url: 'redis://a:6379',
      mode: 'standalone',
      keyPrefix: 'a:',
      healthCheckIntervalMs: 2_000,
    });
    const fromYaml = await loadConfig({
      env: GOOD,
      configFile: await file('store.yaml', 'store: { url: redis://b:6379, keyPrefix: "b:" }\n'),
    });
    expect(fromYaml.store).toEqual({
      url: 'redis://b:6379',
      mode: 'standalone',
      keyPrefix: 'b:',
      healthCheckIntervalMs: 2_000,
    });
    const both = await problemsOf({
      env: { ...GOOD, STORE_URL: 'redis://a:6379', TOKEN_STORE_URL: 'redis://user:hunter2@b:6379' },
    });
    expect(both).toEqual([
      'STORE_URL (store.url): both STORE_URL and its alias TOKEN_STORE_URL are set; keep one',
    ]);
    expect(
      await problemsFromYaml(
        'store: { url: redis://a }\ntoken: { store: { url: redis://b } }\n',
        GOOD,
      ),
    ).toEqual([
      `store.url (in ${join(dir, 'config.yaml')}, or STORE_URL): both store.url and its alias token.store.url are in the file; keep one`,
    ]);
  });

  it('store.healthCheckIntervalMs: 2 s unless set, from the environment or the file, 100 ms to 60 s', async () => {
    const store = { ...GOOD, STORE_URL: 'redis://a:6379' };
    expect((await loadConfig({ env: store })).store.healthCheckIntervalMs).toBe(2_000);
    const env = { ...store, STORE_HEALTH_CHECK_INTERVAL_MS: '10000' };
    expect((await loadConfig({ env })).store.healthCheckIntervalMs).toBe(10_000);
    const yaml = await file('health.yaml', 'store: { healthCheckIntervalMs: 100 }\n');
    const fromYaml = await loadConfig({ env: store, configFile: yaml });
    expect(fromYaml.store.healthCheckIntervalMs).toBe(100);
    for (const value of ['99', '60001', '2s']) {
      expect(
        await problemsOf({ env: { ...store, STORE_HEALTH_CHECK_INTERVAL_MS: value } }),
      ).toEqual([
        `STORE_HEALTH_CHECK_INTERVAL_MS (store.healthCheckIntervalMs): must be a whole number of milliseconds from 100 to 60000 (got "${value}")`,
      ]);
    }
  });

  it('reports every problem of the new keys at once, never echoing the store URL', async () => {
    const problems = await problemsOf({
      env: {
        ...GOOD,
        UPSTREAM_MAX_CONNECTIONS: '0',
        UPSTREAM_RATE_LIMIT: '10 per minute',
        UPSTREAM_QUEUE_MS: '-1',
        UPSTREAM_MAX_COOLDOWN_SECONDS: '86401',
        TOKEN_STORE_URL: 'http://user:hunter2@redis.example',
        TOKEN_STORE_KEY_PREFIX: 'has space',
        PROXY_MAX_IN_FLIGHT: '0',
        PROXY_MAX_PIPELINED: 'many',
        PROXY_MAX_HEADERS: '10001',
        PROXY_BODY_TIMEOUT_MS: '0',
        UPSTREAM_BODY_TIMEOUT_MS: '600001',
        CACHE_RULES: '/v1.0/a/=0,/elsewhere/=10,noslash=5',
        CACHE_MAX_BYTES: '100',
      },
    });
    expect(problems.join('\n')).not.toContain('hunter2');
    const keys = problems.map((problem) => problem.split(':')[0]);
    expect(keys).toEqual([
      'UPSTREAM_MAX_CONNECTIONS (upstream.maxConnections)',
      'UPSTREAM_BODY_TIMEOUT_MS (upstream.bodyTimeoutMs)',
      'UPSTREAM_RATE_LIMIT (upstream.rateLimit)',
      'UPSTREAM_QUEUE_MS (upstream.queueMs)',
      'UPSTREAM_MAX_COOLDOWN_SECONDS (upstream.maxCooldownSeconds)',
      'TOKEN_STORE_URL (token.store.url)',
      'TOKEN_STORE_KEY_PREFIX (token.store.keyPrefix)',
      'PROXY_MAX_IN_FLIGHT (proxy.maxInFlight)',
      'PROXY_MAX_PIPELINED (proxy.maxPipelined)',
      'PROXY_MAX_HEADERS (proxy.maxHeaders)',
      'PROXY_BODY_TIMEOUT_MS (proxy.bodyTimeoutMs)',
      'CACHE_RULES (cache.rules)',
      'CACHE_RULES (cache.rules)',
      'CACHE_MAX_BYTES (cache.maxBytes)',
    ]);
    expect(
      await problemsOf({
        env: { ...GOOD, CACHE_RULES: '/elsewhere/=10', CACHE_MAX_ENTRY_BYTES: '67108865' },
      }),
    ).toEqual([
      'CACHE_RULES (cache.rules): the rule for "/elsewhere/" lies outside every forwarded prefix (/v1.0/) and would never apply',
      'CACHE_MAX_ENTRY_BYTES (cache.maxEntryBytes): must not exceed CACHE_MAX_BYTES (cache.maxBytes) (67108864)',
    ]);
    expect(
      await problemsOf({
        env: { ...GOOD, CACHE_SHARED: 'true', CACHE_STALE_IF_ERROR_SECONDS: '-1' },
      }),
    ).toEqual([
      expect.stringContaining('CACHE_STALE_IF_ERROR_SECONDS (cache.staleIfErrorSeconds)'),
      'CACHE_SHARED (cache.shared): needs a store (STORE_URL (store.url)) to share entries through',
    ]);
  });

  it('store.mode: several hosts, Sentinel settings and a cluster db, every problem at once', async () => {
    const problems = await problemsOf({
      env: {
        ...GOOD,
        STORE_URL: 'redis://:hunter2@a:6379,b:6379',
        STORE_SENTINEL_PRIMARY: 'mymaster',
        STORE_SENTINEL_PASSWORD: 'sentinel-pw',
      },
    });
    expect(problems.join('\n')).not.toMatch(/hunter2|sentinel-pw/);
    expect(problems).toEqual([
      expect.stringMatching(/^STORE_URL \(store\.url\): names 2 hosts, but STORE_MODE/),
      'STORE_SENTINEL_PRIMARY (store.sentinelPrimary): only used with STORE_MODE (store.mode) sentinel (it is standalone)',
      'STORE_SENTINEL_PASSWORD (store.sentinelPassword): only used with STORE_MODE (store.mode) sentinel (it is standalone)',
    ]);
    expect(
      await problemsOf({ env: { ...GOOD, STORE_MODE: 'cluster', STORE_URL: 'redis://a:1,b:2/3' } }),
    ).toEqual([
      expect.stringMatching(/^STORE_URL \(store\.url\): names database 3, but a Redis Cluster/),
    ]);
    expect(await problemsOf({ env: { ...GOOD, STORE_MODE: 'sentinel' } })).toEqual([
      'STORE_URL (store.url): required with STORE_MODE (store.mode) is sentinel',
      'STORE_SENTINEL_PRIMARY (store.sentinelPrimary): required with STORE_MODE (store.mode) is sentinel',
    ]);
    expect(await problemsOf({ env: { ...GOOD, STORE_MODE: 'replicated' } })).toEqual([
      'STORE_MODE (store.mode): must be one of standalone, cluster, sentinel (got "replicated")',
    ]);
    expect(
      await problemsOf({ env: { ...GOOD, STORE_MODE: 'cluster', STORE_URL: 'redis://a:1,,b:2' } }),
    ).toEqual([
      expect.stringContaining('STORE_URL (store.url): must be a redis:// or rediss:// URL'),
    ]);
    const sentinel = await loadConfig({
      env: {
        ...GOOD,
        STORE_MODE: 'sentinel',
        STORE_URL: 'rediss://app:pw@s1:26379,s2:26379,[::1]:26379/1',
        STORE_SENTINEL_PRIMARY: 'mymaster',
        STORE_SENTINEL_PASSWORD: 'sentinel-pw',
      },
    });
    expect(sentinel.store).toMatchObject({ mode: 'sentinel', sentinelPrimary: 'mymaster' });
    expect(JSON.stringify(sentinel.store)).not.toMatch(/:pw@|sentinel-pw/);
    expect(inspect(sentinel.store)).toContain('rediss://app@s1:26379,s2:26379,[::1]:26379/1');
  });

  it('loads config/example.yaml, which documents exactly the defaults', async () => {
    const example = join(import.meta.dirname, '../../config/example.yaml');
    const config = await loadConfig({
      env: {},
      configFile: example,
      readFile: (path) =>
        path === example ? readFile(path, 'utf8') : Promise.resolve(`value-of-${path}\n`),
    });
    const reference = await loadConfig({
      env: {
        UPSTREAM_BASE_URL: 'https://api.sparkcommodities.com',
        CLIENT_ID_FILE: '/var/run/secrets/oauth-sidecar/client-id',
        CLIENT_SECRET_FILE: '/var/run/secrets/oauth-sidecar/client-secret',
      },
      readFile: () => Promise.resolve('x'),
    });
    expect(config).toEqual(reference);
  });

  it.each(['kubernetes.yaml', 'laptop.yaml'])('loads config/%s without problems', async (name) => {
    const path = join(import.meta.dirname, '../../config', name);
    const config = await loadConfig({
      env: {},
      configFile: path,
      readFile: (p) =>
        p === path
          ? readFile(p, 'utf8')
          : Promise.resolve(p.endsWith('.csv') ? 'clientId,clientSecret\ni,s\n' : 'x'),
    });
    expect(config.upstream.baseUrl).toBe('https://api.sparkcommodities.com');
  });

  it('accepts YAML lists, numbers and booleans as well as strings', async () => {
    const configFile = await file(
      'config.yaml',
      [
        'upstream:',
        '  baseUrl: https://api.example.com',
        '  pathPrefixes: [/v1.0, /v2.0/]',
        '  http2: true',
        'token:',
        '  scopes: [a, b]',
        '  refreshFraction: 0.25',
        '  timeoutMs: "2500"',
      ].join('\n'),
    );
    const config = await loadConfig({ env: INLINE, configFile });
    expect(config.upstream.pathPrefixes).toEqual(['/v1.0/', '/v2.0/']);
    expect(config.upstream.http2).toBe(true);
    expect(config.token.scopes).toEqual(['a', 'b']);
    expect(config.token.refreshFraction).toBe(0.25);
    expect(config.token.timeoutMs).toBe(2500);
  });
});

describe('loadConfig: one line per bad configuration', () => {
  it('missing base URL', async () => {
    expect(await problemsFromEnv(INLINE)).toEqual([
      'UPSTREAM_BASE_URL (upstream.baseUrl): required, e.g. https://api.sparkcommodities.com',
    ]);
  });

  it('http:// base URL', async () => {
    expect(await problemsFromEnv({ ...GOOD, UPSTREAM_BASE_URL: 'http://api.example.com' })).toEqual(
      [
        'UPSTREAM_BASE_URL (upstream.baseUrl): must use https:// (http:// is refused unless UPSTREAM_ALLOW_INSECURE_HTTP (upstream.allowInsecureHttp) is true)',
      ],
    );
  });

  it('http:// allowed with allowInsecureHttp, token URL following it', async () => {
    const config = await loadConfig({
      env: {
        ...GOOD,
        UPSTREAM_BASE_URL: 'http://127.0.0.1:9999',
        UPSTREAM_ALLOW_INSECURE_HTTP: 'true',
      },
    });
    expect(config.upstream.baseUrl).toBe('http://127.0.0.1:9999');
    expect(config.upstream.allowInsecureHttp).toBe(true);
    expect(config.token.url).toBe('http://127.0.0.1:9999/oauth/token/');
  });

  it('http:// token URL', async () => {
    expect(await problemsFromEnv({ ...GOOD, TOKEN_URL: 'http://auth.example.com/token' })).toEqual([
      'TOKEN_URL (token.url): must use https:// (http:// is refused unless UPSTREAM_ALLOW_INSECURE_HTTP (upstream.allowInsecureHttp) is true)',
    ]);
  });

  it('base URL with a path', async () => {
    expect(
      await problemsFromEnv({ ...GOOD, UPSTREAM_BASE_URL: 'https://api.example.com/v1.0/' }),
    ).toEqual([
      'UPSTREAM_BASE_URL (upstream.baseUrl): must be an origin only (https://host[:port]); remove the path "/v1.0/" (use upstream.pathPrefixes for forwarded paths)',
    ]);
  });

  it('base URL with query, fragment, other scheme, or not a URL', async () => {
    expect(
      await problemsFromEnv({ ...GOOD, UPSTREAM_BASE_URL: 'https://api.example.com/?a=1#x' }),
    ).toEqual([
      'UPSTREAM_BASE_URL (upstream.baseUrl): must not contain a fragment (#...)',
      'UPSTREAM_BASE_URL (upstream.baseUrl): must not contain a query string (?...)',
    ]);
    expect(await problemsFromEnv({ ...GOOD, UPSTREAM_BASE_URL: 'ftp://api.example.com' })).toEqual([
      'UPSTREAM_BASE_URL (upstream.baseUrl): must use https:// (got scheme "ftp:")',
    ]);
    expect(await problemsFromEnv({ ...GOOD, UPSTREAM_BASE_URL: 'api.example.com' })).toEqual([
      'UPSTREAM_BASE_URL (upstream.baseUrl): must be an absolute URL such as https://api.sparkcommodities.com',
    ]);
    // Several problems of one key: each reported once, in this order.
    expect(
      await problemsFromEnv({ ...GOOD, UPSTREAM_BASE_URL: 'http://u:p@api.example.com/a?b#c' }),
    ).toEqual(
      [
        'must not contain credentials (user:password@); configure credentials.* instead',
        'must not contain a fragment (#...)',
        'must be an origin only (https://host[:port]); remove the path "/a" (use upstream.pathPrefixes for forwarded paths)',
        'must not contain a query string (?...)',
      ].map((problem) => `UPSTREAM_BASE_URL (upstream.baseUrl): ${problem}`),
    );
  });

  it('no credential source', async () => {
    expect(await problemsFromEnv({ UPSTREAM_BASE_URL: 'https://api.example.com' })).toEqual([
      `${SOURCES}: one credential source is required, none is set`,
    ]);
  });

  it('two credential sources', async () => {
    const csv = await file('creds.csv', 'clientId,clientSecret\na,b\n');
    expect(await problemsFromEnv({ ...GOOD, CLIENT_CREDENTIALS_CSV: csv })).toEqual([
      `${SOURCES}: exactly one credential source may be set, found inline (CLIENT_ID, CLIENT_SECRET) and csv (CLIENT_CREDENTIALS_CSV)`,
    ]);
  });

  it('as --help says: the environment wins key by key, but a second credential source is an error', async () => {
    const [id, secret] = [await file('id', 'the-id'), await file('secret', 'the-secret')];
    const csv = await file('creds.csv', 'clientId,clientSecret\na,b\n');
    const yaml = [
      'upstream: { baseUrl: https://api.example.com, timeoutMs: 1000 }',
      `credentials: { clientIdFile: ${id}, clientSecretFile: ${secret} }`,
    ].join('\n');
    const configFile = await file('creds.yaml', yaml);
    const config = await loadConfig({ env: { UPSTREAM_TIMEOUT_MS: '2000' }, configFile });
    expect(config.upstream.timeoutMs).toBe(2000);
    expect(await problemsOf({ env: { CLIENT_CREDENTIALS_CSV: csv }, configFile })).toEqual([
      expect.stringContaining('exactly one credential source may be set, found files'),
    ]);
    expect(USAGE).toMatch(
      /environment variable wins over its key, but the\s+credentials have one source/,
    );
  });

  it('half a pair', async () => {
    const id = await file('id', 'the-id');
    expect(
      await problemsFromEnv({ UPSTREAM_BASE_URL: 'https://api.example.com', CLIENT_ID_FILE: id }),
    ).toEqual([
      'CLIENT_SECRET_FILE (credentials.clientSecretFile): required with CLIENT_ID_FILE (credentials.clientIdFile)',
    ]);
    expect(
      await problemsFromEnv({ UPSTREAM_BASE_URL: 'https://api.example.com', CLIENT_SECRET: 's' }),
    ).toEqual([
      'CLIENT_ID (credentials.clientId): required with CLIENT_SECRET (credentials.clientSecret)',
    ]);
  });

  it('unreadable credential file', async () => {
    const id = await file('id', 'the-id');
    const missing = join(dir, 'missing');
    expect(
      await problemsFromEnv({
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID_FILE: id,
        CLIENT_SECRET_FILE: missing,
      }),
    ).toEqual([
      `CLIENT_SECRET_FILE (credentials.clientSecretFile): ${missing}: cannot read (no such file)`,
    ]);
  });

  it('credential file that is a directory', async () => {
    const id = await file('id', 'the-id');
    expect(
      await problemsFromEnv({
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID_FILE: id,
        CLIENT_SECRET_FILE: dir,
      }),
    ).toEqual([
      `CLIENT_SECRET_FILE (credentials.clientSecretFile): ${dir}: cannot read (is a directory)`,
    ]);
  });

  it('empty secret file (whitespace only)', async () => {
    const id = await file('id', 'the-id\n');
    const secret = await file('secret', ' \n\t\n');
    expect(
      await problemsFromEnv({
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID_FILE: id,
        CLIENT_SECRET_FILE: secret,
      }),
    ).toEqual([`CLIENT_SECRET_FILE (credentials.clientSecretFile): ${secret}: file is empty`]);
  });

  it.each([
    [
      'wrong header',
      'id,secret\na,b\n',
      'first line must be the header clientId,clientSecret or client_id,client_secret',
    ],
    [
      'no row',
      'clientId,clientSecret\n',
      'expected exactly one row of credentials under the header, found 0',
    ],
    [
      'two rows',
      'clientId,clientSecret\na,b\nc,d\n',
      'expected exactly one row of credentials under the header, found 2',
    ],
    ['empty secret', 'clientId,clientSecret\na, \n', 'the client secret is empty'],
    [
      'empty id and secret',
      'clientId,clientSecret\n,\n',
      'the client id and client secret is empty',
    ],
    ['missing cells', 'clientId,clientSecret\na\n', 'the client secret is empty'],
    ['empty file', '\n\n', 'file is empty'],
    [
      'unterminated quote',
      'clientId,clientSecret\n"a,b\n',
      'malformed CSV (unterminated quoted field)',
    ],
  ])('malformed CSV: %s', async (_name, content, fault) => {
    const csv = await file('creds.csv', content);
    expect(
      await problemsFromEnv({
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_CREDENTIALS_CSV: csv,
      }),
    ).toEqual([`CLIENT_CREDENTIALS_CSV (credentials.csvFile): ${csv}: ${fault}`]);
  });

  it.each([
    [
      'UPSTREAM_TIMEOUT_MS',
      'upstream.timeoutMs',
      '0',
      'must be a whole number of milliseconds from 1 to 600000 (got "0")',
    ],
    [
      'UPSTREAM_TIMEOUT_MS',
      'upstream.timeoutMs',
      '600001',
      'must be a whole number of milliseconds from 1 to 600000 (got "600001")',
    ],
    [
      'UPSTREAM_TIMEOUT_MS',
      'upstream.timeoutMs',
      '30s',
      'must be a whole number of milliseconds from 1 to 600000 (got "30s")',
    ],
    [
      'TOKEN_TIMEOUT_MS',
      'token.timeoutMs',
      '1.5',
      'must be a whole number of milliseconds from 1 to 600000 (got "1.5")',
    ],
    [
      'TOKEN_WAIT_MS',
      'token.waitMs',
      '-1',
      'must be a whole number of milliseconds from 0 to 600000 (got "-1")',
    ],
    [
      'TOKEN_REFRESH_MARGIN_SECONDS',
      'token.refreshMarginSeconds',
      '86401',
      'must be a whole number of seconds from 0 to 86400 (got "86401")',
    ],
    [
      'TOKEN_REFRESH_MARGIN_SECONDS',
      'token.refreshMarginSeconds',
      'sixty',
      'must be a whole number of seconds from 0 to 86400 (got "sixty")',
    ],
    [
      'TOKEN_RECOVERY_BACKOFF_CAP_MS',
      'token.recoveryBackoffCapMs',
      '999',
      'must be a whole number of milliseconds from 1000 to 60000 (got "999")',
    ],
    [
      'TOKEN_RECOVERY_BACKOFF_CAP_MS',
      'token.recoveryBackoffCapMs',
      '60001',
      'must be a whole number of milliseconds from 1000 to 60000 (got "60001")',
    ],
    [
      'TOKEN_REFRESH_FRACTION',
      'token.refreshFraction',
      '0',
      'must be a number greater than 0 and less than 1, e.g. 0.2 (got "0")',
    ],
    [
      'TOKEN_REFRESH_FRACTION',
      'token.refreshFraction',
      '1',
      'must be a number greater than 0 and less than 1, e.g. 0.2 (got "1")',
    ],
    [
      'TOKEN_REFRESH_FRACTION',
      'token.refreshFraction',
      'half',
      'must be a number greater than 0 and less than 1, e.g. 0.2 (got "half")',
    ],
    ['TOKEN_REQUEST_FORMAT', 'token.format', 'xml', 'must be one of json, form (got "xml")'],
    [
      'TOKEN_CLIENT_AUTH',
      'token.clientAuth',
      'header',
      'must be one of body, basic (got "header")',
    ],
    [
      'LOG_LEVEL',
      'log.level',
      'verbose',
      'must be one of fatal, error, warn, info, debug, trace, silent (got "verbose")',
    ],
    [
      'UPSTREAM_HTTP2',
      'upstream.http2',
      'maybe',
      'must be true or false (1/0 and yes/no also accepted) (got "maybe")',
    ],
    [
      'PROXY_LISTEN',
      'proxy.listen',
      '8080',
      'must be host:port, [ipv6]:port or :port (got "8080")',
    ],
    [
      'PROXY_LISTEN',
      'proxy.listen',
      '::1:8080',
      'must be host:port, [ipv6]:port or :port (got "::1:8080")',
    ],
    [
      'ADMIN_LISTEN',
      'admin.listen',
      '0.0.0.0:70000',
      'port must be from 0 to 65535 (got "0.0.0.0:70000")',
    ],
    [
      'ADMIN_LISTEN',
      'admin.listen',
      '[nope]:80',
      '"nope" is not an IPv6 address; must be host:port, [ipv6]:port or :port (got "[nope]:80")',
    ],
    [
      'ADMIN_LISTEN',
      'admin.listen',
      'bad host:80',
      'must be host:port, [ipv6]:port or :port (got "bad host:80")',
    ],
    [
      'UPSTREAM_PATH_PREFIXES',
      'upstream.pathPrefixes',
      'v1.0/',
      'each prefix must start with "/" (got "v1.0/")',
    ],
    [
      'UPSTREAM_PATH_PREFIXES',
      'upstream.pathPrefixes',
      '/v1.0/../admin/',
      'a prefix must not contain "." or ".." segments (got "/v1.0/../admin/")',
    ],
    [
      'UPSTREAM_PATH_PREFIXES',
      'upstream.pathPrefixes',
      ' , ',
      'must name at least one path prefix, e.g. /v1.0/',
    ],
    // A rule without "=": one line saying what is missing (it once said `got "nothing"`).
    [
      'CACHE_RULES',
      'cache.rules',
      'garbage',
      'rule 1: must be PREFIX=SECONDS, e.g. /v1.0/contracts/=300 (got "garbage": no "=")',
    ],
    [
      'CACHE_RULES',
      'cache.rules',
      '/v1.0/contracts/=soon',
      'rule 1: the TTL must be a whole number of seconds from 1 to 86400 (got "soon"), e.g. /v1.0/contracts/=300',
    ],
    // Beyond the safe-integer range: one line (zod, used before, printed this one twice).
    [
      'UPSTREAM_TIMEOUT_MS',
      'upstream.timeoutMs',
      '-1e17',
      'must be a whole number of milliseconds from 1 to 600000 (got "-100000000000000000")',
    ],
    [
      'UPSTREAM_TIMEOUT_MS',
      'upstream.timeoutMs',
      '1e999',
      'must be a whole number of milliseconds from 1 to 600000 (got "null")',
    ],
    [
      'TOKEN_SCOPES',
      'token.scopes',
      'read write',
      "scopes are comma-separated; \"read write\" contains whitespace, '\"' or '\\'",
    ],
  ])('%s=%s', async (env, key, value, message) => {
    expect(await problemsFromEnv({ ...GOOD, [env]: value })).toEqual([
      `${env} (${key}): ${message}`,
    ]);
  });

  it('CA file unreadable or without a certificate', async () => {
    const missing = join(dir, 'ca.pem');
    expect(await problemsFromEnv({ ...GOOD, UPSTREAM_CA_FILE: missing })).toEqual([
      `UPSTREAM_CA_FILE (upstream.caFile): ${missing}: cannot read (no such file)`,
    ]);
    const notPem = await file('ca.txt', 'hello');
    expect(await problemsFromEnv({ ...GOOD, UPSTREAM_CA_FILE: notPem })).toEqual([
      `UPSTREAM_CA_FILE (upstream.caFile): ${notPem}: no PEM certificate (-----BEGIN CERTIFICATE-----) in the file`,
    ]);
    const pem = await file('ca.pem', (await createTestPki()).caCert);
    const config = await loadConfig({ env: { ...GOOD, UPSTREAM_CA_FILE: pem } });
    expect(config.upstream.caFile).toBe(pem);
    expect(config.warnings).toBeUndefined();
  });

  it('a CA bundle TLS would not read fully loads with one warning per certificate', async () => {
    const [a, b] = [(await createTestPki()).caCert, (await createTestPki()).caCert];
    // `cat a.pem b.pem` where a.pem has no final newline: Node trusts none of the file.
    const joined = await file('joined.pem', a.trimEnd() + b);
    const label = `UPSTREAM_CA_FILE (upstream.caFile): ${joined}`;
    const tail = 'the bundle may be trusted in part or not at all';
    expect((await loadConfig({ env: { ...GOOD, UPSTREAM_CA_FILE: joined } })).warnings).toEqual([
      `${label}: certificate 1 of 2: text after its END line on the same line; ${tail}`,
      `${label}: certificate 2 of 2: its BEGIN line does not start a line (a file without a final newline joined to another?); ${tail}`,
    ]);
    const garbled = await file(
      'garbled.pem',
      `${a.trimEnd()}\n-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n`,
    );
    expect((await loadConfig({ env: { ...GOOD, UPSTREAM_CA_FILE: garbled } })).warnings).toEqual([
      `UPSTREAM_CA_FILE (upstream.caFile): ${garbled}: certificate 2 of 2: not a readable X.509 certificate; ${tail}`,
    ]);
    const fine = await file('fine.pem', `${a.trimEnd()}\n${b.trimEnd()}`);
    expect(
      (await loadConfig({ env: { ...GOOD, UPSTREAM_CA_FILE: fine } })).warnings,
    ).toBeUndefined();
  });

  it('check --offline: absent credential and CA files are noted, not problems; unknown settings are', async () => {
    const notes: string[] = [];
    const offline: LoadConfigOptions['strictness'] = {
      kind: 'offline-check',
      note: (line) => notes.push(line),
    };
    const absent = join(dir, 'absent');
    const config = await loadConfig({
      env: {
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID_FILE: `${absent}/id`,
        CLIENT_SECRET_FILE: `${absent}/secret`,
        UPSTREAM_CA_FILE: `${absent}/ca.pem`,
      },
      strictness: offline,
    });
    expect(config.credentials.source).toBe('files');
    expect([...notes].sort()).toEqual([
      `CLIENT_ID_FILE (credentials.clientIdFile): ${absent}/id: not checked (no such file)`,
      `CLIENT_SECRET_FILE (credentials.clientSecretFile): ${absent}/secret: not checked (no such file)`,
      `UPSTREAM_CA_FILE (upstream.caFile): ${absent}/ca.pem: not checked (no such file)`,
    ]);
    const empty = await file('id', ' ');
    const failure = await loadConfig({
      env: {
        ...GOOD,
        CACHE_RULE: '/v1.0/=60',
        CLIENT_ID: undefined,
        CLIENT_SECRET: undefined,
        CLIENT_ID_FILE: empty,
        CLIENT_SECRET_FILE: `${absent}/secret`,
      },
      strictness: offline,
    }).then(
      () => [] as readonly string[],
      (error: unknown) => (error as ConfigError).problems,
    );
    expect(failure).toEqual([
      'CACHE_RULE: not a setting, did you mean CACHE_RULES? (docs/configuration.md)',
      `CLIENT_ID_FILE (credentials.clientIdFile): ${empty}: file is empty`,
    ]);
  });

  it('unknown YAML keys, with a suggestion when one is close', async () => {
    const yaml = [
      'upstream:',
      '  baseURL: https://api.example.com',
      '  colour: blue',
      'tokn:',
      '  url: https://x',
      'LOG_LEVEL: debug',
      'extra: 1',
    ].join('\n');
    const configFile = join(dir, 'config.yaml');
    expect(await problemsFromYaml(yaml, INLINE)).toEqual([
      `upstream.baseURL: unknown key (in ${configFile}), did you mean upstream.baseUrl?`,
      `upstream.colour: unknown key (in ${configFile})`,
      `tokn: unknown key (in ${configFile}), did you mean token?`,
      `LOG_LEVEL: unknown key (in ${configFile}), did you mean log.level?`,
      `extra: unknown key (in ${configFile})`,
      'UPSTREAM_BASE_URL (upstream.baseUrl): required, e.g. https://api.sparkcommodities.com',
    ]);
  });

  it('a section that is not a mapping, a root that is not a mapping', async () => {
    const configFile = join(dir, 'config.yaml');
    expect(await problemsFromYaml('upstream: https://api.example.com\n', INLINE)).toEqual([
      `upstream (in ${configFile}): must be a mapping of keys, e.g. upstream.<key>: value`,
      'UPSTREAM_BASE_URL (upstream.baseUrl): required, e.g. https://api.sparkcommodities.com',
    ]);
    expect(await problemsFromYaml('- a\n- b\n', GOOD)).toEqual([
      `--config ${configFile}: must be a YAML mapping with sections upstream, token, store, credentials, proxy, admin, log, cache, quota, callers, egress, tracing`,
    ]);
  });

  it('broken YAML names the file and the position', async () => {
    const configFile = join(dir, 'config.yaml');
    const problems = await problemsFromYaml('upstream:\n  baseUrl: [unclosed\n', GOOD);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      new RegExp(`^--config ${configFile}: invalid YAML at line \\d+, column \\d+: .+`),
    );
  });

  it('duplicate YAML keys are broken YAML', async () => {
    const problems = await problemsFromYaml('log:\n  level: info\n  level: debug\n', GOOD);
    expect(problems).toEqual([expect.stringContaining('invalid YAML at line 3')]);
  });

  it('unreadable config file', async () => {
    const missing = join(dir, 'nope.yaml');
    expect(await problemsOf({ env: GOOD, configFile: missing })).toEqual([
      `--config ${missing}: cannot read configuration file (no such file)`,
    ]);
  });

  it('an empty YAML file is an empty layer', async () => {
    const config = await loadConfig({
      env: GOOD,
      configFile: await file('empty.yaml', '# nothing\n'),
    });
    expect(config.upstream.baseUrl).toBe('https://api.example.com');
  });
});

describe('loadConfig: quota callers', () => {
  it('reads the caller, the gateway header and the weights from the environment', async () => {
    const config = await loadConfig({
      env: {
        ...GOOD,
        QUOTA_CALLER: 'Price-Reports',
        QUOTA_CALLER_HEADER: 'X-Caller',
        QUOTA_CALLERS: 'reports-ui=3, nightly=1:batch',
      },
    });
    expect(config.quota).toEqual({
      caller: 'price-reports',
      callerHeader: 'x-caller',
      callers: [
        { name: 'reports-ui', weight: 3, priority: 'interactive' },
        { name: 'nightly', weight: 1, priority: 'batch' },
      ],
    });
  });

  it('reads quota.callers as a YAML list', async () => {
    const config = await loadConfig({
      env: GOOD,
      configFile: await file(
        'quota.yaml',
        'quota:\n  callers:\n    - {name: nightly, weight: 2, priority: batch}\n    - {name: ui, weight: 5}\n',
      ),
    });
    expect(config.quota.callers).toEqual([
      { name: 'nightly', weight: 2, priority: 'batch' },
      { name: 'ui', weight: 5, priority: 'interactive' },
    ]);
  });

  it('lists every problem of the quota keys at once', async () => {
    expect(
      await problemsFromEnv({
        ...GOOD,
        QUOTA_CALLER: 'no spaces',
        QUOTA_CALLER_HEADER: 'Authorization',
        QUOTA_CALLERS: 'z=0,b=2:urgent,a=1,a=2,c',
      }),
    ).toEqual([
      'QUOTA_CALLER (quota.caller): must be 1 to 64 of a-z, 0-9, ".", "_", "-" (got "no spaces"), e.g. reports-ui',
      "QUOTA_CALLER_HEADER (quota.callerHeader): must not be authorization: it carries credentials or framing, not a caller's name",
      'QUOTA_CALLERS (quota.callers): caller 1: the weight must be a whole number from 1 to 1000 (got "0")',
      'QUOTA_CALLERS (quota.callers): caller 2: the priority must be interactive or batch (got "urgent")',
      'QUOTA_CALLERS (quota.callers): caller 4: names the caller a twice',
      'QUOTA_CALLERS (quota.callers): caller 5: must be name=weight[:interactive|batch] (got "c")',
    ]);
  });
});

describe('loadConfig: tracing (OpenTelemetry variables)', () => {
  it('is off without an endpoint, and with OTEL_SDK_DISABLED', async () => {
    expect((await loadConfig({ env: GOOD })).tracing).toBeUndefined();
    const disabled = await loadConfig({
      env: {
        ...GOOD,
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
        OTEL_SDK_DISABLED: 'true',
      },
    });
    expect(disabled.tracing).toBeUndefined();
  });

  it('sends to <endpoint>/v1/traces, or to the traces endpoint as given; headers never serialised', async () => {
    const config = await loadConfig({
      env: {
        ...GOOD,
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
        OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s3cr%3Dt',
        OTEL_RESOURCE_ATTRIBUTES: 'k8s.pod.name=p-1,team=trading',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      },
    });
    expect(config.tracing).toMatchObject({
      url: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: { 'api-key': 's3cr=t' },
      serviceName: 'oauth-sidecar',
      resourceAttributes: { 'k8s.pod.name': 'p-1', team: 'trading' },
      sampler: 'parentbased_traceidratio',
      samplerArg: 0.25,
      maxQueueSize: 2048,
    });
    expect(JSON.stringify(config)).not.toContain('s3cr');
    const traces = await loadConfig({
      env: {
        ...GOOD,
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://vendor.example/otlp/traces',
      },
    });
    expect(traces.tracing?.url).toBe('https://vendor.example/otlp/traces');
  });

  it('lists every tracing problem at once, never echoing the headers', async () => {
    const problems = await problemsFromEnv({
      ...GOOD,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://collector:4317',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_HEADERS: 'broken-secret-value',
      OTEL_TRACES_SAMPLER_ARG: '2',
    });
    expect(problems).toHaveLength(4);
    expect(problems.join('\n')).not.toContain('broken-secret-value');
    expect(problems[1]).toContain(
      'OTEL_EXPORTER_OTLP_PROTOCOL (tracing.protocol): must be one of http/protobuf, http/json',
    );
  });
});

describe('loadConfig: everything at once', () => {
  it('reports every problem in one ConfigError, and formats it for stderr', async () => {
    const configFile = await file(
      'config.yaml',
      'upstream:\n  baseURL: https://x\nlog:\n  level: loud\n',
    );
    const secretFile = await file('secret', '\n');
    const env = {
      UPSTREAM_BASE_URL: 'http://api.example.com/v1.0',
      UPSTREAM_TIMEOUT_MS: 'abc',
      TOKEN_REQUEST_FORMAT: 'xml',
      TOKEN_CLIENT_AUTH: 'header',
      TOKEN_REFRESH_FRACTION: '2',
      PROXY_LISTEN: 'localhost',
      CLIENT_ID_FILE: join(dir, 'missing-id'),
      CLIENT_SECRET_FILE: secretFile,
    };
    const error = await loadConfig({ env, configFile }).then(
      () => undefined,
      (e: unknown) => e as ConfigError,
    );
    expect(error).toBeInstanceOf(ConfigError);
    const expected = [
      `upstream.baseURL: unknown key (in ${configFile}), did you mean upstream.baseUrl?`,
      'UPSTREAM_BASE_URL (upstream.baseUrl): must be an origin only (https://host[:port]); remove the path "/v1.0" (use upstream.pathPrefixes for forwarded paths)',
      'UPSTREAM_TIMEOUT_MS (upstream.timeoutMs): must be a whole number of milliseconds from 1 to 600000 (got "abc")',
      'TOKEN_REQUEST_FORMAT (token.format): must be one of json, form (got "xml")',
      'TOKEN_CLIENT_AUTH (token.clientAuth): must be one of body, basic (got "header")',
      'TOKEN_REFRESH_FRACTION (token.refreshFraction): must be a number greater than 0 and less than 1, e.g. 0.2 (got "2")',
      'PROXY_LISTEN (proxy.listen): must be host:port, [ipv6]:port or :port (got "localhost")',
      `log.level (in ${configFile}, or LOG_LEVEL): must be one of fatal, error, warn, info, debug, trace, silent (got "loud")`,
      `CLIENT_ID_FILE (credentials.clientIdFile): ${join(dir, 'missing-id')}: cannot read (no such file)`,
      `CLIENT_SECRET_FILE (credentials.clientSecretFile): ${secretFile}: file is empty`,
    ];
    expect(error?.problems).toEqual(expected);
    const text = formatConfigProblems(error as ConfigError);
    expect(text.split('\n')).toEqual([
      `oauth-sidecar: invalid configuration (${expected.length} problems):`,
      ...expected.map((line) => `  - ${line}`),
    ]);
  });

  it('says "1 problem" for one', () => {
    expect(formatConfigProblems(new ConfigError(['x']))).toBe(
      'oauth-sidecar: invalid configuration (1 problem):\n  - x',
    );
  });
});

describe('loadConfig: secrets never appear in errors', () => {
  const SECRET = 'S3cr3t-Value-42';

  async function allText(options: LoadConfigOptions): Promise<string> {
    const error = await loadConfig(options).then(
      () => undefined,
      (e: unknown) => e as ConfigError,
    );
    expect(error).toBeInstanceOf(ConfigError);
    return [
      error?.message,
      formatConfigProblems(error as ConfigError),
      JSON.stringify(error),
      inspect(error),
    ].join('\n');
  }

  it('a malformed inline secret in YAML (not a string)', async () => {
    const text = await allText({
      env: { UPSTREAM_BASE_URL: 'https://api.example.com' },
      configFile: await file(
        'c.yaml',
        `credentials:\n  clientId: 4242424242\n  clientSecret: [${SECRET}]\n`,
      ),
    });
    expect(text).toContain('.yaml, or CLIENT_SECRET): must be a string (quote it in YAML)');
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('4242424242');
  });

  it('a secret inside a line of broken YAML', async () => {
    const text = await allText({
      env: GOOD,
      configFile: await file('c.yaml', `credentials:\n  clientSecret: ${SECRET}: [oops\n`),
    });
    expect(text).toContain('invalid YAML');
    expect(text).not.toContain(SECRET);
  });

  it('a headerless CSV whose first line is the secret', async () => {
    const csv = await file('c.csv', `my-id,${SECRET}\n`);
    const text = await allText({
      env: { UPSTREAM_BASE_URL: 'https://api.example.com', CLIENT_CREDENTIALS_CSV: csv },
    });
    expect(text).toContain('first line must be the header');
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('my-id');
  });

  it('a CSV with two rows', async () => {
    const csv = await file('c.csv', `clientId,clientSecret\nid1,${SECRET}\nid2,${SECRET}x\n`);
    const text = await allText({
      env: { UPSTREAM_BASE_URL: 'https://api.example.com', CLIENT_CREDENTIALS_CSV: csv },
    });
    expect(text).not.toContain(SECRET);
  });

  it('credentials in the base URL and inline secrets next to other problems', async () => {
    const text = await allText({
      env: {
        UPSTREAM_BASE_URL: `https://user:${SECRET}@api.example.com/path`,
        TOKEN_URL: `https://user:${SECRET}@auth.example.com/`,
        CLIENT_ID: 'the-id',
        CLIENT_SECRET: SECRET,
        CLIENT_CREDENTIALS_CSV: join(dir, 'also.csv'),
      },
    });
    expect(text).toContain('must not contain credentials');
    expect(text).not.toContain(SECRET);
  });

  it('the loaded config serialises and inspects without the inline secret', async () => {
    const config = await loadConfig({ env: { ...GOOD, CLIENT_SECRET: SECRET } });
    expect(config.credentials).toMatchObject({ source: 'inline', clientSecret: SECRET });
    expect(JSON.stringify(config)).not.toContain(SECRET);
    expect(inspect(config, { depth: 5 })).not.toContain(SECRET);
  });
});

describe('loadConfig: credential sources', () => {
  it('files, trimmed', async () => {
    const id = await file('id', '  the-id\n');
    const secret = await file('secret', 'the-secret\r\n');
    const config = await loadConfig({
      env: {
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID_FILE: id,
        CLIENT_SECRET_FILE: secret,
      },
    });
    expect(config.credentials).toEqual({
      source: 'files',
      clientIdFile: id,
      clientSecretFile: secret,
    });
  });

  it('the id in the file, the secret from the environment (layers merge key by key)', async () => {
    const configFile = await file(
      'c.yaml',
      'upstream:\n  baseUrl: https://api.example.com\ncredentials:\n  clientId: the-id\n',
    );
    const config = await loadConfig({ env: { CLIENT_SECRET: 'the-secret' }, configFile });
    expect(config.credentials).toMatchObject({
      source: 'inline',
      clientId: 'the-id',
      clientSecret: 'the-secret',
    });
  });

  it.each([
    ['camelCase header', 'clientId,clientSecret\nthe-id,the-secret\n'],
    ['snake_case header, any case', 'CLIENT_ID,Client_Secret\nthe-id,the-secret\n'],
    ['BOM and CRLF', '\uFEFFclientId,clientSecret\r\nthe-id,the-secret\r\n'],
    [
      'quoted, spaces, extra columns',
      'name, "client_id" ,"client_secret",created\n"my app", "the-id" ,"the-secret",2026-01-01\n',
    ],
    ['no trailing newline, blank lines', '\nclientId,clientSecret\n\nthe-id,the-secret'],
  ])('CSV: %s', async (_name, content) => {
    const csv = await file('creds.csv', content);
    const config = await loadConfig({
      env: { UPSTREAM_BASE_URL: 'https://api.example.com', CLIENT_CREDENTIALS_CSV: csv },
    });
    expect(config.credentials).toEqual({ source: 'csv', csvFile: csv });
  });

  it('an unreadable CSV', async () => {
    const csv = await file('creds.csv', 'clientId,clientSecret\na,b\n');
    await chmod(csv, 0o000);
    const readable = await readFile(csv, 'utf8').then(
      () => true,
      () => false,
    );
    // Root reads anything; the check only means something for an ordinary user.
    if (readable) return;
    expect(
      await problemsFromEnv({
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_CREDENTIALS_CSV: csv,
      }),
    ).toEqual([
      `CLIENT_CREDENTIALS_CSV (credentials.csvFile): ${csv}: cannot read (${permissionDenied(process.getuid?.())})`,
    ]);
  });

  it('a permission error names the uid and the fix (root reads anything, so the error is made)', () => {
    const denied = Object.assign(new Error('EACCES: permission denied, open /s/c.csv'), {
      code: 'EACCES',
    });
    expect(readFailure(denied)).toBe(permissionDenied(process.getuid?.()));
    expect(permissionDenied(1000)).toMatch(
      /^permission denied for uid 1000 \(the image runs as uid 1000\): .*chown.*chmod 0644/,
    );
  });
});
