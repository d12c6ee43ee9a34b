/**
 * One version, package.json's, everywhere it is written or shown: the image's label, the
 * manifests' image tags, the docs' git pins, CHANGELOG.md's sections, `--version` and the token
 * grants' User-Agent; scripts/bump-version.mjs moves them all at once (tried on a temp copy).
 */
import { execFile } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { USER_AGENT, VERSION } from '../src/version.js';
import { MAIN, tempDir } from './helpers/sidecar-process.js';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');
const BUMP = join(ROOT, 'scripts', 'bump-version.mjs');
const read = (root: string, path: string): string => readFileSync(join(root, path), 'utf8');
const { version } = JSON.parse(read(ROOT, 'package.json')) as { version: string };

/** `bump-version.mjs args` on `root`: its exit code and output. */
async function bump(root: string, ...args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BUMP, '--root', root, ...args]);
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, output: failed.stdout + failed.stderr };
  }
}

/** The files the version lives in, copied. */
function copyOfRepository(): string {
  const copy = tempDir('oauth-sidecar-bump-');
  for (const path of [
    'package.json',
    'package-lock.json',
    'Dockerfile',
    'README.md',
    'CHANGELOG.md',
    'docs',
    'deploy',
  ]) {
    cpSync(join(ROOT, path), join(copy, path), { recursive: true });
  }
  return copy;
}

describe('the version', () => {
  it('agrees everywhere with package.json (bump-version.mjs --check)', async () => {
    expect(await bump(ROOT, '--check')).toMatchObject({ code: 0 });
    expect(read(ROOT, 'Dockerfile')).toContain(`ARG VERSION=${version}`);
    expect(read(ROOT, 'Dockerfile')).toContain('org.opencontainers.image.version="${VERSION}"');
    expect(read(ROOT, 'CHANGELOG.md')).toMatch(
      new RegExp(`^## \\[${version}\\] - \\d{4}-\\d\\d-\\d\\d$`, 'm'),
    );
    expect(read(ROOT, 'deploy/components/oauth-sidecar/sidecar.yaml')).toContain(
      `ghcr.io/example/oauth-sidecar:${version}`,
    );
  });

  it('is what --version prints and what the token grants send as User-Agent', async () => {
    const { stdout } = await run(process.execPath, [MAIN, '--version']);
    expect(stdout.trim()).toBe(version);
    expect(VERSION).toBe(version);
    expect(USER_AGENT).toBe(`oauth-sidecar/${version}`);
  });

  it('moves everywhere at once with bump-version.mjs, and --check names a place left behind', async () => {
    const copy = copyOfRepository();
    const bumped = await bump(copy, '9.8.7', '--date', '2030-01-02');
    expect(bumped.code, bumped.output).toBe(0);
    expect(await bump(copy, '--check')).toMatchObject({ code: 0 });
    expect(JSON.parse(read(copy, 'package.json'))).toMatchObject({ version: '9.8.7' });
    const changelog = read(copy, 'CHANGELOG.md');
    expect(changelog).toContain(`## [Unreleased]\n\n## [9.8.7] - 2030-01-02`);
    expect(changelog).toContain(`## [${version}] - `);
    for (const path of [
      'docs/operations.md',
      'deploy/README.md',
      'deploy/overlays/shared-gateway/deployment.yaml',
    ]) {
      expect(read(copy, path), path).not.toMatch(
        new RegExp(`(:|\\?ref=v)${version.replaceAll('.', '\\.')}\\b`),
      );
    }
    const dockerfile = join(copy, 'Dockerfile');
    writeFileSync(
      dockerfile,
      read(copy, 'Dockerfile').replace('ARG VERSION=9.8.7', 'ARG VERSION=9.8.6'),
    );
    const behind = await bump(copy, '--check');
    expect(behind.code).toBe(1);
    expect(behind.output).toContain('Dockerfile: Dockerfile VERSION 9.8.6, package.json 9.8.7');
  });
});
