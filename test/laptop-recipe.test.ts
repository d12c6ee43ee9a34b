/**
 * README.md's laptop recipe, run as written against `node dist/main.js standin`: the stand-in's
 * `export` line in place of the API's (as the README says), everything else verbatim. The fixed
 * ports of the recipe (8443, 8080, 9090) are the only change: free ports, so parallel runs agree.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { closed } from './helpers/command.js';
import { MAIN, tempDir, waitFor } from './helpers/sidecar-process.js';

const ROOT = join(import.meta.dirname, '..');

/** The indented block under "**Laptop or VM**" in README.md. */
function recipe(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.split('**Laptop or VM**')[1]!;
  const lines = section.split('\n');
  const start = lines.findIndex((line) => line.startsWith('    '));
  const end = lines.findIndex((line, i) => i > start && !line.startsWith('    '));
  return lines.slice(start, end).map((line) => line.slice(4));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

function run(command: string, cwd: string, env: Record<string, string> = {}) {
  const child = spawn('bash', ['-c', command], {
    cwd,
    detached: true,
    env: { PATH: process.env.PATH ?? '', HOME: cwd, ...env },
  });
  const output = { text: '' };
  child.stdout.on('data', (d: Buffer) => (output.text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output.text += d.toString()));
  const exited = closed(child).then(({ code }) => code);
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGTERM');
    await exited;
  };
  return { output, exited, stop };
}

describe("README's laptop recipe", () => {
  it('works as written against the stand-in: check prints a token lifetime, serve answers through the proxy', async () => {
    const lines = recipe();
    expect(lines[0]).toBe('npm ci && npm run build');
    expect(lines[1]).toMatch(/^export UPSTREAM_BASE_URL=https:\/\/api\.sparkcommodities\.com /);
    expect(lines.at(-1)).toMatch(/^node dist\/main\.js check && node dist\/main\.js /);

    const dir = tempDir();
    symlinkSync(join(ROOT, 'dist'), join(dir, 'dist'));
    const [standinPort, proxyPort, adminPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    const standin = run(`exec node ${MAIN} standin`, dir, {
      STANDIN_LISTEN: `127.0.0.1:${standinPort}`,
    });
    let sidecar: ReturnType<typeof run> | undefined;
    try {
      await waitFor(() => standin.output.text.includes('\nexport '), 10_000);
      const exportLine = /^export .*$/m.exec(standin.output.text)![0];
      // Absolute paths: the line works from any directory (the sidecar runs from another below).
      const files = join(realpathSync(dir), 'standin');
      expect(exportLine).toBe(
        `export UPSTREAM_BASE_URL=https://127.0.0.1:${standinPort} UPSTREAM_CA_FILE=${files}/ca.pem CLIENT_CREDENTIALS_CSV=${files}/credentials.csv`,
      );
      expect(existsSync(join(files, 'credentials.csv'))).toBe(true);
      // A final newline: `cat ca.pem other.pem` makes a valid bundle.
      expect(readFileSync(join(files, 'ca.pem'), 'utf8')).toMatch(/-----END CERTIFICATE-----\n$/);
      const elsewhere = join(dir, 'elsewhere');
      mkdirSync(elsewhere);
      symlinkSync(join(ROOT, 'dist'), join(elsewhere, 'dist'));
      // The build already ran (npm test builds first): the recipe from its second line.
      const script = [...lines.slice(1, 2), exportLine, ...lines.slice(2)]
        .join('\n')
        .replaceAll('127.0.0.1:9090', `127.0.0.1:${adminPort}`);
      sidecar = run(script, elsewhere, { PROXY_LISTEN: `127.0.0.1:${proxyPort}` });
      await waitFor(() => sidecar!.output.text.includes('oauth-sidecar listening'), 15_000);
      expect(sidecar.output.text).toContain('grant: client_credentials\n');
      expect(sidecar.output.text).toContain('expires in: 1799 s\n');
      const answer = await request(`http://127.0.0.1:${proxyPort}/v1.0/contracts/`);
      expect(answer.statusCode).toBe(200);
      await answer.body.json();
      const ready = await request(`http://127.0.0.1:${adminPort}/readyz`);
      expect(ready.statusCode).toBe(200);
      await ready.body.dump();
      expect(sidecar.output.text).not.toContain('standin-secret');
    } finally {
      await sidecar?.stop();
      await standin.stop();
    }
  });
});
