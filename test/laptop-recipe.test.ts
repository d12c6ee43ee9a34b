/**
 * README.md's laptop recipe, run as written against `node dist/main.js standin`: the stand-in's
 * `export` line in place of the API's (as the README says), everything else verbatim. The fixed
 * ports of the recipe (8443, 8080, 9090) are the only change: port 0, and the test reads the ports
 * the processes print. It never picks a "free" port itself: one found free and released can be
 * handed out again before the process binds it (two sequential picks may even get the same one).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { closed } from './helpers/command.js';
import { MAIN, tempDir } from './helpers/sidecar-process.js';
import { Fatal, waitFor } from './helpers/wait.js';

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
  /**
   * Wait until the output holds a whole line containing `text` and return it; a process that
   * ended first fails at once, with its output.
   */
  const printed = async (text: string, timeoutMs: number, what: string): Promise<string> => {
    const line = () =>
      output.text
        .split('\n')
        .slice(0, -1)
        .find((l) => l.includes(text));
    await waitFor(
      () => {
        if (line() !== undefined) return true;
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Fatal(`${what} ended before printing ${JSON.stringify(text)}:\n${output.text}`);
        return false;
      },
      timeoutMs,
      `${what} to print ${JSON.stringify(text)}`,
    ).catch((error: unknown) => {
      if (error instanceof Fatal) throw error;
      throw new Error(`${String(error)}; output so far:\n${output.text}`);
    });
    return line()!;
  };
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGTERM');
    await exited;
  };
  return { output, exited, printed, stop };
}

describe("README's laptop recipe", () => {
  it('works as written against the stand-in: check prints a token lifetime, serve answers through the proxy', async () => {
    const lines = recipe();
    expect(lines[0]).toBe('npm ci && npm run build');
    expect(lines[1]).toMatch(/^export UPSTREAM_BASE_URL=https:\/\/api\.sparkcommodities\.com /);
    expect(lines.at(-1)).toMatch(/^node dist\/main\.js check && node dist\/main\.js /);

    const dir = tempDir();
    symlinkSync(join(ROOT, 'dist'), join(dir, 'dist'));
    const standin = run(`exec node ${MAIN} standin`, dir, { STANDIN_LISTEN: '127.0.0.1:0' });
    let sidecar: ReturnType<typeof run> | undefined;
    try {
      const exportLine = await standin.printed('export UPSTREAM_BASE_URL=', 15_000, 'the stand-in');
      // Absolute paths: the line works from any directory (the sidecar runs from another below).
      const files = join(realpathSync(dir), 'standin');
      const port = /^export UPSTREAM_BASE_URL=https:\/\/127\.0\.0\.1:([1-9]\d*) /.exec(
        exportLine,
      )?.[1];
      expect(exportLine).toBe(
        `export UPSTREAM_BASE_URL=https://127.0.0.1:${port} UPSTREAM_CA_FILE=${files}/ca.pem CLIENT_CREDENTIALS_CSV=${files}/credentials.csv`,
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
        .replaceAll('127.0.0.1:9090', '127.0.0.1:0');
      sidecar = run(script, elsewhere, { PROXY_LISTEN: '127.0.0.1:0' });
      const listening = JSON.parse(
        await sidecar.printed('oauth-sidecar listening', 20_000, 'the recipe'),
      ) as { proxy: string; admin: string };
      expect(sidecar.output.text).toContain('grant: client_credentials\n');
      expect(sidecar.output.text).toContain('expires in: 1799 s\n');
      const answer = await request(`http://${listening.proxy}/v1.0/contracts/`);
      expect(answer.statusCode).toBe(200);
      await answer.body.json();
      const ready = await request(`http://${listening.admin}/readyz`);
      expect(ready.statusCode).toBe(200);
      await ready.body.dump();
      expect(sidecar.output.text).not.toContain('standin-secret');
    } finally {
      await sidecar?.stop();
      await standin.stop();
    }
  });
});
