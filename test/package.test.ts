/**
 * The npm package as a user installs it (docs/operations.md "On a VM"): `npm pack`
 * makes oauth-sidecar-<version>.tgz with only what runs, and `npm install -g` of it into a temporary
 * prefix, offline (pino, the one runtime package, travels inside the tarball: bundleDependencies),
 * gives an `oauth-sidecar` command that works outside the checkout. Needs `npm run build` first.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from './helpers/wait.js';
import { tempDir } from './helpers/sidecar-process.js';
import { startCommand, type Command, exportedVariables } from './helpers/command.js';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  bin: Record<string, string>;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  bundleDependencies: string[];
};
/** Node on the PATH for the command's `#!/usr/bin/env node` line; npm from the PATH as given. */
const PATH = [dirname(process.execPath), process.env.PATH].join(delimiter);

let tarball: string;
let files: string[];
let command: string;
let outside: string;
const started: Command[] = [];

beforeAll(async () => {
  const packDir = tempDir('oauth-sidecar-pack-');
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', packDir], {
    cwd: ROOT,
    env: { ...process.env, PATH },
    maxBuffer: 64 * 1024 * 1024,
  });
  const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  tarball = join(packDir, packed!.filename);
  files = packed!.files.map((file) => file.path);
  const prefix = tempDir('oauth-sidecar-prefix-');
  // --offline: nothing may come from the registry (the tarball carries its one package).
  await run(
    'npm',
    ['install', '-g', '--offline', '--no-audit', '--no-fund', '--prefix', prefix, tarball],
    {
      cwd: packDir,
      env: { ...process.env, PATH },
    },
  );
  command = join(prefix, 'bin', 'oauth-sidecar');
  outside = tempDir('oauth-sidecar-outside-');
}, 180_000);

afterAll(async () => {
  await Promise.all(started.map((child) => child.stop()));
});

describe('npm pack', () => {
  it('is named after the version and holds only what runs, the docs and the config examples', () => {
    expect(tarball.endsWith(`oauth-sidecar-${PKG.version}.tgz`)).toBe(true);
    const allowed = [
      /^package\.json$/,
      /^README\.md$/,
      /^CHANGELOG\.md$/,
      /^dist\/main\.js$/,
      /^dist\/chunks\/[^/]+\.js$/,
      /^config\/[^/]+\.(yaml|json)$/,
      /^deploy\/systemd\/[^/]+$/,
      /^docs\/[^/]+\.md$/,
      /^node_modules\//,
    ];
    expect(files.filter((file) => !allowed.some((pattern) => pattern.test(file)))).toEqual([]);
    for (const needed of [
      'dist/main.js',
      'config/example.yaml',
      'config/oauth-sidecar.schema.json',
      'deploy/systemd/oauth-sidecar.service',
      'docs/operations.md',
    ]) {
      expect(files).toContain(needed);
    }
    expect(files).toContain('node_modules/pino/package.json');
  });

  it('declares pino as its one runtime package, carried inside, and runs no script at install', () => {
    expect(PKG.bin).toEqual({ 'oauth-sidecar': 'dist/main.js' });
    expect(Object.keys(PKG.dependencies)).toEqual(['pino']);
    expect(PKG.bundleDependencies).toEqual(['pino']);
    const hooks = ['preinstall', 'install', 'postinstall', 'prepare', 'prepack', 'postpack'];
    expect(Object.keys(PKG.scripts).filter((name) => hooks.includes(name))).toEqual([]);
  });
});

describe('the installed oauth-sidecar command, run outside the checkout', () => {
  it('prints the version', async () => {
    const { stdout } = await run(command, ['--version'], { cwd: outside, env: { PATH } });
    expect(stdout.trim()).toBe(PKG.version);
  });

  it('runs the stand-in and checks a configuration against it', async () => {
    const standin = startCommand(command, ['standin'], {
      cwd: outside,
      env: { PATH, STANDIN_LISTEN: '127.0.0.1:0' },
    });
    started.push(standin);
    // A child process: wait for its printed line with generous limits, not a fixed sleep.
    await waitFor(
      () => Promise.resolve(standin.stdout().includes('export ')),
      30_000,
      'the stand-in',
    );
    const env = exportedVariables(standin.stdout());
    expect(env.UPSTREAM_BASE_URL).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const { stdout } = await run(command, ['check'], { cwd: outside, env: { PATH, ...env } });
    expect(stdout).toContain('grant: client_credentials');
    expect(stdout).not.toContain('standin-secret');
  }, 60_000);
});
