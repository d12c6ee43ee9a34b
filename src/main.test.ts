/** The CLI's choice of command, in-process: importing main.ts runs nothing (it is not the entry). */
import { describe, expect, it } from 'vitest';
import { USAGE } from './cli.js';
import { EXIT_CONFIG } from './errors.js';
import { run } from './main.js';
import { VERSION } from './version.js';

function io(): {
  out: string[];
  err: string[];
  io: { out(l: string): void; err(l: string): void };
} {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { out: (l) => out.push(l), err: (l) => err.push(l) } };
}

describe('run', () => {
  it('prints the usage and the version, exit 0', async () => {
    const help = io();
    expect(await run(['--help'], {}, help.io)).toBe(0);
    expect(help.out).toEqual([USAGE]);
    const version = io();
    expect(await run(['--version'], {}, version.io)).toBe(0);
    expect(version.out).toEqual([VERSION]);
  });

  it('refuses an unknown command with the usage, exit 64', async () => {
    const bad = io();
    expect(await run(['frobnicate'], {}, bad.io)).toBe(64);
    expect(bad.err.join('\n')).toContain('oauth-sidecar: ');
    expect(bad.err.join('\n')).toContain(USAGE);
    expect(bad.out).toEqual([]);
  });

  it('lists every configuration problem at once, exit 78, never the secret given', async () => {
    const check = io();
    const env = { CLIENT_SECRET: 'main-test-secret', UPSTREAM_TIMEOUT_MS: 'soon' };
    expect(await run(['check', '--offline'], env, check.io)).toBe(EXIT_CONFIG);
    const text = check.err.join('\n');
    expect(text).toContain('UPSTREAM_BASE_URL');
    expect(text).toContain('UPSTREAM_TIMEOUT_MS');
    expect(text).not.toContain('main-test-secret');
  });

  it('checks a valid configuration offline, exit 0', async () => {
    const check = io();
    const env = {
      UPSTREAM_BASE_URL: 'https://api.example.com',
      CLIENT_ID: 'a',
      CLIENT_SECRET: 'b',
    };
    expect(await run(['check', '--offline'], env, check.io)).toBe(0);
    expect(check.out.join('\n')).toContain('configuration: ok (offline');
    expect(check.err).toEqual([]);
  });
});
