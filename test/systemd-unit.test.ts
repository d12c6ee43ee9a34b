/**
 * deploy/systemd/oauth-sidecar.service as systemd would run it, on a machine where no systemd
 * runs: the test reads the unit, gives the sidecar its command line and environment (the
 * EnvironmentFile example, then Environment= with %d as $CREDENTIALS_DIRECTORY, filled as
 * LoadCredential= would fill it), serves, and drains on the unit's KillSignal. The unit's syntax:
 * deploy/ci/check-systemd.sh (systemd-analyze verify, in .ci/run).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { DRAIN_TIMEOUT_MS } from '../src/sidecar.js';
import { startSidecarProcess, tempDir, useStandin } from './helpers/sidecar-process.js';

const DIR = join(import.meta.dirname, '..', 'deploy', 'systemd');
const UNIT = readFileSync(join(DIR, 'oauth-sidecar.service'), 'utf8');
const ENV_FILE = readFileSync(join(DIR, 'oauth-sidecar.env'), 'utf8');

/** `Key=value` lines of one section, in order, comments left out. */
function section(text: string, name: string): [string, string][] {
  const lines = text.split('\n').map((line) => line.trim());
  const start = lines.indexOf(`[${name}]`);
  const end = lines.findIndex((line, i) => i > start && line.startsWith('['));
  return lines
    .slice(start + 1, end === -1 ? undefined : end)
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]);
}

const SERVICE = section(UNIT, 'Service');
const values = (key: string): string[] => SERVICE.filter(([k]) => k === key).map(([, v]) => v);
const one = (key: string): string => {
  const found = values(key);
  expect(found, key).toHaveLength(1);
  return found[0]!;
};

/** `A=1 B=2` (an Environment= line, or an environment file's lines) → variables. */
function assignments(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split(/\s+|\n/)
      .filter((item) => item.includes('=') && !item.startsWith('#'))
      .map((item) => [item.slice(0, item.indexOf('=')), item.slice(item.indexOf('=') + 1)]),
  );
}

const client = { clientId: 'unit-client', clientSecret: 'unit-secret-value' };
const api = useStandin(client);

describe('deploy/systemd/oauth-sidecar.service', () => {
  it('is hardened as the issue lists, on loopback, restarting on failure but not on exit 78', () => {
    expect(one('DynamicUser')).toBe('yes');
    expect(one('ProtectSystem')).toBe('strict');
    expect(one('NoNewPrivileges')).toBe('yes');
    expect(one('PrivateTmp')).toBe('yes');
    expect(one('CapabilityBoundingSet')).toBe('');
    expect(one('RestrictAddressFamilies')).toBe('AF_INET AF_INET6 AF_UNIX');
    expect(one('Restart')).toBe('on-failure');
    expect(one('RestartPreventExitStatus').split(' ')).toContain('78');
    expect(one('KillSignal')).toBe('SIGTERM');
    // The drain ends within the stop timeout, with room for the process to exit.
    expect(Number(/^(\d+)s$/.exec(one('TimeoutStopSec'))?.[1]) * 1000).toBeGreaterThan(
      DRAIN_TIMEOUT_MS,
    );
    const env = Object.assign({}, ...values('Environment').map(assignments)) as Record<
      string,
      string
    >;
    expect(env.PROXY_LISTEN).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(env.ADMIN_LISTEN).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it('serves with its command line, its environment and LoadCredential= files, and drains on SIGTERM', async () => {
    const credentials = tempDir('oauth-sidecar-credentials-');
    for (const line of values('LoadCredential')) {
      const [name, source] = line.split(':') as [string, string];
      expect(source.startsWith('/etc/oauth-sidecar/'), line).toBe(true);
      // What the operator installs at `source`: the portal's CSV.
      writeFileSync(
        join(credentials, name),
        `clientId,clientSecret\n${client.clientId},${client.clientSecret}\n`,
      );
    }
    // systemd: EnvironmentFile= overrides Environment=; the example, pointed at the stand-in.
    const fromFile = {
      ...assignments(ENV_FILE),
      UPSTREAM_BASE_URL: api.standin.url,
      UPSTREAM_CA_FILE: api.caFile,
    };
    const fromUnit = Object.assign(
      {},
      ...values('Environment').map((line) => assignments(line.replaceAll('%d', credentials))),
    ) as Record<string, string>;
    const env: Record<string, string> = {
      ...fromUnit,
      ...fromFile,
      CREDENTIALS_DIRECTORY: credentials,
      // The unit's loopback hosts, on ports free here.
      PROXY_LISTEN: fromUnit.PROXY_LISTEN!.replace(/:\d+$/, ':0'),
      ADMIN_LISTEN: fromUnit.ADMIN_LISTEN!.replace(/:\d+$/, ':0'),
    };
    const [command, ...args] = one('ExecStart').split(' ');
    expect(command).toBe('/usr/local/bin/oauth-sidecar');
    const sidecar = await startSidecarProcess(env, args);
    try {
      expect(sidecar.proxyUrl).toMatch(/^http:\/\/127\.0\.0\.1:/);
      expect(sidecar.adminUrl).toMatch(/^http:\/\/127\.0\.0\.1:/);
      const answer = await request(`${sidecar.proxyUrl}/v1.0/contracts/`);
      await answer.body.dump();
      expect(answer.statusCode).toBe(200);
    } finally {
      expect(await sidecar.stop('SIGTERM')).toBe(0);
    }
    expect(sidecar.stdout.join('\n')).not.toContain(client.clientSecret);
  });
});
