import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { loadConfig } from './load.js';
import { parseValue } from './parsers.js';
import { STORE_MODES, keyPrefix, sentinelPrimary, storeUrl } from './store-parsers.js';

const PASSWORD = 'hunter2-store-password';

describe('store.url', () => {
  it('takes a redis:// or rediss:// URL of one host or several, trimmed', () => {
    expect(parseValue(storeUrl(), ` rediss://u:${PASSWORD}@redis:6380/0 `)).toEqual({
      ok: true,
      value: `rediss://u:${PASSWORD}@redis:6380/0`,
    });
    expect(parseValue(storeUrl(), 'redis://a:6379,b:6379')).toMatchObject({ ok: true });
  });

  it('refuses another scheme, no host or a path, and never repeats the URL', () => {
    for (const raw of [
      `http://u:${PASSWORD}@redis:6379`,
      `redis://u:${PASSWORD}@/0`,
      `redis://u:${PASSWORD}@redis:6379/db/x`,
      '',
      42,
    ]) {
      const result = parseValue(storeUrl(), raw);
      expect(result).toMatchObject({
        ok: false,
        problems: [expect.stringMatching(/^must be a redis:\/\/ or rediss:\/\/ URL/)],
      });
      expect(JSON.stringify(result)).not.toContain(PASSWORD);
    }
  });

  it('a problem line names the setting, and the password appears nowhere in the error', async () => {
    const error = await loadConfig({
      env: {
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID: 'id',
        CLIENT_SECRET: 'secret',
        STORE_URL: `http://u:${PASSWORD}@redis:6379`,
      },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toContainEqual(expect.stringMatching(/^STORE_URL \(store\.url\): must be/));
    expect(JSON.stringify(problems) + String(error)).not.toContain(PASSWORD);
  });
});

describe('store.sentinelPrimary and store.keyPrefix', () => {
  it('take 1 to 128 (primary) or 1 to 64 (prefix) printable characters', () => {
    expect(parseValue(sentinelPrimary(), ' mymaster ')).toEqual({ ok: true, value: 'mymaster' });
    expect(parseValue(sentinelPrimary(), 'p'.repeat(128)).ok).toBe(true);
    expect(parseValue(keyPrefix(), 'oauth-sidecar:')).toEqual({
      ok: true,
      value: 'oauth-sidecar:',
    });
    expect(parseValue(keyPrefix(), 'k'.repeat(64)).ok).toBe(true);
  });

  it('refuse spaces, control characters and what is too long, naming what they got', () => {
    expect(parseValue(sentinelPrimary(), 'my master')).toEqual({
      ok: false,
      problems: ['must be 1 to 128 printable ASCII characters without spaces (got "my master")'],
    });
    expect(parseValue(sentinelPrimary(), 'p'.repeat(129)).ok).toBe(false);
    expect(parseValue(keyPrefix(), 'k'.repeat(65))).toMatchObject({
      ok: false,
      problems: [expect.stringMatching(/^must be 1 to 64 printable ASCII characters/)],
    });
    expect(parseValue(keyPrefix(), 'a\u0007b').ok).toBe(false);
    expect(parseValue(keyPrefix(), '   ')).toEqual({
      ok: false,
      problems: ['must be a key prefix such as oauth-sidecar:'],
    });
  });

  it('knows the three modes', () => {
    expect(STORE_MODES).toEqual(['standalone', 'cluster', 'sentinel']);
  });
});
