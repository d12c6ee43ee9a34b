/**
 * `oauth-sidecar check --offline` (the bundle): a platform team's configuration CI checks a
 * configuration with no secret mounted and no network. Every setting and rule is checked, every
 * file that exists is read and checked, an absent credential file is named as not checked; exit
 * 78 on any problem, 0 otherwise, and nothing is contacted. Each process is independent of the
 * others: they run side by side.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki } from '../src/standin/index.js';
import { runCli, tempDir, writeTemp } from './helpers/sidecar-process.js';

const KUBERNETES_YAML = join(import.meta.dirname, '..', 'config', 'kubernetes.yaml');

/** A listener that only counts who connects: the token endpoint, store, proxy and collector. */
let listener: Server;
let connections = 0;
let port: number;
let caPem: string;

beforeAll(async () => {
  listener = createServer((socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as AddressInfo).port;
  caPem = (await createTestPki()).caCert;
});

afterAll(async () => {
  await new Promise((resolve) => listener?.close(resolve));
});

/** kubernetes.yaml with `edit` applied, as a file of its own. */
function editedYaml(edit: (text: string) => string): string {
  const file = join(tempDir(), 'sidecar.yaml');
  writeFileSync(file, edit(readFileSync(KUBERNETES_YAML, 'utf8')));
  return file;
}

describe.concurrent('check --offline', { timeout: 60_000 }, () => {
  it('passes config/kubernetes.yaml with no secret mounted: exit 0, the absent files named as not checked', async () => {
    const [result, online] = await Promise.all([
      runCli(['check', '--offline', '--config', KUBERNETES_YAML], {}),
      runCli(['check', '--config', KUBERNETES_YAML], {}),
    ]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^features: /);
    expect(lines).toContain(
      'not checked: CLIENT_ID_FILE (credentials.clientIdFile): /var/run/secrets/oauth-sidecar/client-id: not checked (no such file)',
    );
    expect(lines).toContain(
      'not checked: CLIENT_SECRET_FILE (credentials.clientSecretFile): /var/run/secrets/oauth-sidecar/client-secret: not checked (no such file)',
    );
    expect(lines.at(-1)).toBe('configuration: ok (offline: no token requested, nothing contacted)');
    // Without --offline the same files are problems (a serving sidecar needs them).
    expect(online.code).toBe(78);
    expect(online.stderr).toContain('cannot read (no such file)');
  });

  it('exits 78 on a misspelt key, an unknown variable or an invalid value, naming each', async () => {
    const misspelt = editedYaml((text) => text.replace('  baseUrl:', '  baseURL:'));
    const [typo, values] = await Promise.all([
      runCli(['check', '--offline', '--config', misspelt], {}),
      runCli(['check', '--offline', '--config', KUBERNETES_YAML], {
        LOG_LEVL: 'debug',
        PROXY_LISTEN: 'everywhere',
        CACHE_RULES: '/v1.0/=soon',
      }),
    ]);
    expect(typo.code).toBe(78);
    expect(typo.stderr).toContain('upstream.baseURL');
    expect(values.code).toBe(78);
    // An unknown variable is a problem here, not a warning: a CI should fail on the typo.
    expect(values.stderr).toContain('LOG_LEVL: not a setting, did you mean LOG_LEVEL?');
    expect(values.stderr).toContain('PROXY_LISTEN');
    expect(values.stderr).toContain('CACHE_RULES');
    expect(values.stdout).toBe('');
  });

  it('reads and checks every file that exists: credential files and the CA bundle', async () => {
    const empty = writeTemp('client-id', '\n');
    const secret = writeTemp('client-secret', 'offline-Secret-value\n');
    const brokenCa = writeTemp('ca.pem', caPem.replace(/\n[A-Za-z0-9+/]{20}/, '\n#'));
    const csv = writeTemp('credentials.csv', 'no,header,here\n');
    const [result, badCsv, good] = await Promise.all([
      runCli(['check', '--offline'], {
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID_FILE: empty,
        CLIENT_SECRET_FILE: secret,
        UPSTREAM_CA_FILE: brokenCa,
      }),
      runCli(['check', '--offline'], {
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_CREDENTIALS_CSV: csv,
      }),
      runCli(['check', '--offline'], {
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID_FILE: writeTemp('client-id', 'offline-client\n'),
        CLIENT_SECRET_FILE: secret,
        UPSTREAM_CA_FILE: writeTemp('ca.pem', caPem),
      }),
    ]);
    expect(result.code).toBe(78);
    expect(result.stderr).toContain(
      `CLIENT_ID_FILE (credentials.clientIdFile): ${empty}: file is empty`,
    );
    expect(result.stderr).toContain(
      `${brokenCa}: certificate 1 of 1: not a readable X.509 certificate`,
    );
    expect(result.stdout + result.stderr).not.toContain('offline-Secret-value');
    expect(badCsv.code).toBe(78);
    expect(badCsv.stderr).toContain(`CLIENT_CREDENTIALS_CSV (credentials.csvFile): ${csv}`);
    expect(good.code).toBe(0);
    expect(good.stdout).not.toContain('not checked:');
  });

  it('contacts nothing: token endpoint, store, egress proxy and collector all at a counting port', async () => {
    const at = `127.0.0.1:${port}`;
    const result = await runCli(['check', '--offline'], {
      UPSTREAM_BASE_URL: `https://${at}`,
      TOKEN_URL: `https://${at}/oauth/token/`,
      CLIENT_ID: 'offline-client',
      CLIENT_SECRET: 'offline-secret',
      STORE_URL: `redis://${at}`,
      HTTPS_PROXY: `http://${at}`,
      NO_PROXY: 'internal.example',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://${at}`,
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`egress proxy: http://${at}`);
    expect(connections).toBe(0);
  });
});
