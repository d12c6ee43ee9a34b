import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { DEFAULT_LISTEN_HOST, DEFAULT_TOKEN_PATH, EXAMPLE_BASE_URL } from './defaults.js';
import { loadConfig } from './load.js';
import { parseListen } from './parsers.js';

const INLINE = { CLIENT_ID: 'id', CLIENT_SECRET: 'secret' };

describe('configuration constants', () => {
  it('the token endpoint defaults to /oauth/token/ under the base URL (docs/api-notes.md §4.1)', async () => {
    expect(DEFAULT_TOKEN_PATH).toBe('/oauth/token/');
    const config = await loadConfig({
      env: { UPSTREAM_BASE_URL: 'https://api.example.com/', ...INLINE },
    });
    expect(config.token.url).toBe('https://api.example.com/oauth/token/');
  });

  it('a listen address written as :port binds every IPv4 interface', () => {
    expect(DEFAULT_LISTEN_HOST).toBe('0.0.0.0');
    expect(parseListen(':8080')).toEqual({ host: '0.0.0.0', port: 8080 });
  });

  it('a missing base URL is answered with the API’s own URL as the example', async () => {
    expect(EXAMPLE_BASE_URL).toBe('https://api.sparkcommodities.com');
    const error = await loadConfig({ env: INLINE }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toContainEqual(
      expect.stringContaining(`e.g. ${EXAMPLE_BASE_URL}`),
    );
  });
});
