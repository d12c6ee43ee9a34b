/**
 * The built bundle names a misspelt setting (a warning, or exit 78 under STRICT_CONFIG) and states
 * the optional features in effect, at start-up and in `check` (docs/configuration.md "Unknown settings").
 */
import { describe, expect, it } from 'vitest';
import { runCli, startSidecarProcess, useStandin } from './helpers/sidecar-process.js';

const SECRET = 'unknown-settings-secret';
const api = useStandin({ clientId: 'demo-client', clientSecret: SECRET });

function env(extra: Record<string, string> = {}): Record<string, string> {
  return {
    UPSTREAM_BASE_URL: api.standin.url,
    UPSTREAM_CA_FILE: api.caFile,
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: SECRET,
    UPSTREAM_RATE_LIMIT: '20/s',
    ...extra,
  };
}

const TYPO = { CACHE_RULE: '/v1.0/contracts/=60', CLIENT_SECRT: 'typo-secret-value' };

// Each test runs its own process: side by side (docs/testing.md "Tests side by side").
describe.concurrent('unknown settings and the features in effect, from the bundle', () => {
  it('serve: a warning line naming CACHE_RULES, then one line with the features in effect', async () => {
    const sidecar = await startSidecarProcess(env(TYPO));
    try {
      const lines = sidecar.stdout.map((line) => JSON.parse(line) as Record<string, unknown>);
      const warnings = lines.filter((line) => line.level === 'warn').map((line) => line.msg);
      expect(warnings).toEqual([
        'configuration: CACHE_RULE: not a setting, did you mean CACHE_RULES? (docs/configuration.md)',
        'configuration: CLIENT_SECRT: not a setting, did you mean CLIENT_SECRET? (docs/configuration.md)',
      ]);
      const features = lines.filter((line) => String(line.msg).startsWith('features in effect'));
      expect(features).toHaveLength(1);
      expect(features[0]!.msg).toBe(
        'features in effect: cache rules: off; rate limit: 20/s (queue 2000 ms); callers: all as "default"; store: off; tracing: off; egress proxy: off',
      );
      expect(features[0]!.features).toMatchObject({
        cache: 'off',
        rateLimit: '20/s (queue 2000 ms)',
      });
      expect(sidecar.stdout.join('\n')).not.toContain('typo-secret-value');
    } finally {
      await sidecar.stop();
    }
  });

  it('STRICT_CONFIG=true: exit 78 naming every unknown setting, before listening', async () => {
    const result = await runCli([], env({ ...TYPO, STRICT_CONFIG: 'true' }));
    expect(result.code).toBe(78);
    expect(result.stderr).toContain(
      '  - CACHE_RULE: not a setting, did you mean CACHE_RULES? (docs/configuration.md)\n',
    );
    expect(result.stderr).toContain('CLIENT_SECRT: not a setting, did you mean CLIENT_SECRET?');
    expect(result.stderr + result.stdout).not.toContain('typo-secret-value');
    expect(result.stdout).toBe('');
  });

  it('check: the warning on stderr and the same features line on stdout', async () => {
    const result = await runCli(['check'], env({ ...TYPO, CACHE_RULES: '/v1.0/contracts/=60' }));
    expect(result.code).toBe(0);
    expect(result.stderr).toBe(
      'warning: CACHE_RULE: not a setting, did you mean CACHE_RULES? (docs/configuration.md)\n' +
        'warning: CLIENT_SECRT: not a setting, did you mean CLIENT_SECRET? (docs/configuration.md)\n',
    );
    expect(result.stdout).toContain(
      'features: cache rules: /v1.0/contracts/=60s (local); rate limit: 20/s (queue 2000 ms); callers: all as "default"; store: off; tracing: off; egress proxy: off\n',
    );
  });
});
