/**
 * `oauth-sidecar standin` as the callers' token issuer, run as a process: it prints the caller-auth
 * variables, `oauth-sidecar standin token` in the same directory prints a token that jose verifies
 * against the running stand-in's discovery and JWKS, and the signing key outlives a restart.
 */
import { spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { closed } from './helpers/command.js';
import { freePort } from './helpers/redis-server.js';
import { MAIN, runCli, tempDir, waitFor } from './helpers/sidecar-process.js';

function startStandinProcess(dir: string, port: number) {
  const child = spawn(process.execPath, [MAIN, 'standin'], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', STANDIN_LISTEN: `127.0.0.1:${port}` },
  });
  const output = { text: '' };
  child.stdout.on('data', (d: Buffer) => (output.text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output.text += d.toString()));
  const exited = closed(child).then(() => undefined);
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  return { output, stop };
}

/** The JWKS the stand-in serves, found through its discovery document, over its own CA. */
async function servedKeys(dir: string, issuer: string) {
  const agent = new Agent({ connect: { ca: readFileSync(join(dir, 'standin/ca.pem'), 'utf8') } });
  try {
    const get = async (url: string) => {
      const res = await request(url, { dispatcher: agent });
      expect(res.statusCode).toBe(200);
      return (await res.body.json()) as Record<string, unknown>;
    };
    const discovery = await get(`${issuer}/.well-known/openid-configuration`);
    expect(discovery.issuer).toBe(issuer);
    return (await get(discovery.jwks_uri as string)) as { keys: { kid: string }[] };
  } finally {
    await agent.close();
  }
}

describe('oauth-sidecar standin token', () => {
  it('prints a caller token of the running stand-in that verifies against its JWKS, and the key outlives a restart', async () => {
    const dir = tempDir();
    const port = await freePort();
    const issuer = `https://127.0.0.1:${port}`;
    let standin = startStandinProcess(dir, port);
    try {
      // A child process prints when it is ready: wait for it (generous: a cold start under load).
      await waitFor(() => standin.output.text.includes('curl -H'), 15_000, 'the stand-in');
      expect(standin.output.text).toContain(
        `\nexport CALLER_AUTH=jwt CALLER_JWT_ISSUER=${issuer} CALLER_JWT_CA_FILE=${join(dir, 'standin', 'ca.pem')} CALLER_RULES='system:serviceaccount:laptop:*=laptop'\n`,
      );
      expect(standin.output.text).toContain(
        'curl -H "Authorization: Bearer $(node dist/main.js standin token --sub system:serviceaccount:laptop:me)" http://127.0.0.1:8080/v1.0/contracts/',
      );
      expect(statSync(join(dir, 'standin/caller-key.pem')).mode & 0o777).toBe(0o600);
      expect(standin.output.text).not.toContain('PRIVATE KEY');

      const minted = await runCli(
        ['standin', 'token', '--sub', 'system:serviceaccount:laptop:me', '--ttl', '600'],
        {},
        20_000,
        dir,
      );
      expect(minted.stderr).toBe('');
      expect(minted.code).toBe(0);
      const token = minted.stdout.trim();
      expect(minted.stdout).toBe(`${token}\n`);
      const keys = await servedKeys(dir, issuer);
      const verify = (jwks: typeof keys) =>
        jwtVerify(token, createLocalJWKSet(jwks), {
          issuer,
          audience: 'oauth-sidecar',
          algorithms: ['ES256'],
          requiredClaims: ['exp'],
        });
      const { payload } = await verify(keys);
      expect(payload.sub).toBe('system:serviceaccount:laptop:me');
      expect(payload.exp! - payload.iat!).toBe(600);

      const other = await runCli(
        ['standin', 'token', '--sub', 'x', '--aud', 'gw'],
        {},
        20_000,
        dir,
      );
      expect(other.code).toBe(0);
      const otherPayload = JSON.parse(
        Buffer.from(other.stdout.trim().split('.')[1]!, 'base64url').toString(),
      ) as { aud: string; exp: number; iat: number };
      expect(otherPayload).toMatchObject({ aud: 'gw', sub: 'x', iss: issuer });
      expect(otherPayload.exp - otherPayload.iat).toBe(3600);

      // Restarted in the same directory: the same key, so tokens already handed out still verify.
      await standin.stop();
      standin = startStandinProcess(dir, port);
      await waitFor(() => standin.output.text.includes('curl -H'), 15_000, 'the stand-in again');
      const again = await servedKeys(dir, issuer);
      expect(again.keys.map((k) => k.kid)).toEqual(keys.keys.map((k) => k.kid));
      await expect(verify(again)).resolves.toBeDefined();
    } finally {
      await standin.stop();
    }
  });

  it('says what to do where no stand-in was started, and refuses a bad lifetime', async () => {
    const empty = await runCli(['standin', 'token', '--sub', 'a'], {}, 20_000, tempDir());
    expect(empty.code).toBe(1);
    expect(empty.stdout).toBe('');
    expect(empty.stderr).toMatch(/start `oauth-sidecar standin` in this directory first/);
    const usage = await runCli(['standin', 'token', '--sub', 'a', '--ttl', '5m'], {}, 20_000);
    expect(usage.code).toBe(64);
    expect(usage.stderr).toContain('--ttl needs whole seconds');
  });
});
