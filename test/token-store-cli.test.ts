/**
 * `oauth-sidecar check` with a token store (docs/reference.md "Command line"): the real process against the
 * stand-in and a real password-protected `redis-server`.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startStandin, type Standin } from '../src/standin/index.js';
import { startRedisServer, type RedisServer } from './helpers/redis-server.js';
import { runCli, writeTemp } from './helpers/sidecar-process.js';

const PASSWORD = 'redis-pw-3e8a1c';
let standin: Standin;
let redis: RedisServer;
let caFile: string;

beforeAll(async () => {
  [standin, redis] = await Promise.all([
    startStandin({ clientId: 'demo-client', clientSecret: 'demo-secret' }),
    startRedisServer({ password: PASSWORD }),
  ]);
  caFile = writeTemp('ca.pem', standin.caCert);
});
afterAll(async () => {
  await Promise.all([standin?.close(), redis?.close()]); // undefined when a start failed
});

const env = (storeUrl: string): Record<string, string> => ({
  UPSTREAM_BASE_URL: standin.url,
  UPSTREAM_CA_FILE: caFile,
  CLIENT_ID: 'demo-client',
  CLIENT_SECRET: 'demo-secret',
  TOKEN_STORE_URL: storeUrl,
});

it('prints store: ok with the server version', async () => {
  const result = await runCli(['check'], env(redis.url));
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  expect(result.stdout).toMatch(/^store: ok \(redis \d+\.\d+\.\d+\)$/m);
  expect(result.stdout).not.toContain(PASSWORD);
});

it('fails with the store error, exit 1, the URL shown without its password', async () => {
  const wrong = redis.url.replace(encodeURIComponent(PASSWORD), 'not-the-password');
  const result = await runCli(['check'], env(wrong));
  expect(result.code).toBe(1);
  expect(result.stderr).toMatch(
    /^oauth-sidecar check: failed: store: redis:\/\/default@127\.0\.0\.1:\d+: /m,
  );
  expect(result.stderr + result.stdout).not.toContain('not-the-password');

  const closed = await runCli(['check'], env('redis://127.0.0.1:1'));
  expect(closed.code).toBe(1);
  expect(closed.stderr).toMatch(/failed: store: redis:\/\/127\.0\.0\.1:1: /);
});
