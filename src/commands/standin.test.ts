import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { Agent, request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { exportedVariables } from '../../test/helpers/command.js';
import { tempDir } from '../../test/helpers/sidecar-process.js';
import { printStandinToken, runStandin, shellWord, STANDIN_CALLER_RULES } from './standin.js';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: { out: (l: string) => void out.push(l), err: (l: string) => void err.push(l) },
  };
}

const LOCAL = { STANDIN_LISTEN: '127.0.0.1:0' };
const ME = { sub: 'system:serviceaccount:laptop:me', aud: undefined, ttlSeconds: undefined };

// The command writes under ./standin/ of the working directory, as an operator runs it: each test
// works in a fresh directory (vitest runs this file in a process of its own).
const home = process.cwd();
afterAll(() => process.chdir(home));
function freshDir(): string {
  const dir = tempDir('oauth-sidecar-standin-cmd-');
  process.chdir(dir);
  return dir;
}

describe('shellWord', () => {
  it('leaves a plain word alone and single-quotes anything else', () => {
    expect(shellWord('/tmp/a-b_c/ca.pem')).toBe('/tmp/a-b_c/ca.pem');
    expect(shellWord('/tmp/my dir/ca.pem')).toBe("'/tmp/my dir/ca.pem'");
    expect(shellWord("it's")).toBe("'it'\\''s'");
    expect(shellWord('$(rm -rf ~)')).toBe("'$(rm -rf ~)'");
  });
});

describe('oauth-sidecar standin', () => {
  it('a bad STANDIN_LISTEN is a usage error', async () => {
    freshDir();
    const { err, io: lines } = io();
    expect(await runStandin({ STANDIN_LISTEN: 'nowhere' }, lines)).toBe(64);
    expect(err).toEqual([
      expect.stringMatching(/^oauth-sidecar standin: STANDIN_LISTEN: must be host:port/),
    ]);
  });

  it('writes its CA, credentials and caller key, and prints a recipe that works', async () => {
    const dir = freshDir();
    const { out, io: lines } = io();
    const started = await runStandin(LOCAL, lines);
    if (typeof started === 'number') throw new Error(`exit ${started}`);
    try {
      const vars = exportedVariables(out.join('\n'));
      expect(vars.UPSTREAM_CA_FILE).toBe(`${dir}/standin/ca.pem`);
      expect(vars.CLIENT_CREDENTIALS_CSV).toBe(`${dir}/standin/credentials.csv`);
      const ca = readFileSync(vars.UPSTREAM_CA_FILE!, 'utf8');
      expect(ca.endsWith('-----END CERTIFICATE-----\n')).toBe(true);
      expect(statSync(vars.CLIENT_CREDENTIALS_CSV!).mode & 0o777).toBe(0o600);
      expect(statSync('standin/caller-key.pem').mode & 0o777).toBe(0o600);
      expect(readFileSync('standin/caller-issuer', 'utf8')).toBe(`${vars.UPSTREAM_BASE_URL}\n`);
      expect(out.join('\n')).toContain(`CALLER_RULES='${STANDIN_CALLER_RULES}'`);
      const [, id, secret] = /\n([^,]+),([^,\n]+)\n$/.exec(
        readFileSync(vars.CLIENT_CREDENTIALS_CSV!, 'utf8'),
      )!;
      // The printed variables reach the stand-in over HTTPS, trusting only the written CA.
      const trusting = new Agent({ connect: { ca } });
      try {
        const res = await request(`${vars.UPSTREAM_BASE_URL}/oauth/token/`, {
          method: 'POST',
          dispatcher: trusting,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            grantType: 'clientCredentials',
            clientId: id,
            clientSecret: secret,
          }),
        });
        expect(res.statusCode).toBe(201);
        await res.body.dump();

        // `standin token` mints a caller token the stand-in's served keys verify.
        const minted = io();
        expect(await printStandinToken(ME, minted.io)).toBe(0);
        expect(minted.out).toHaveLength(1);
        const jwks = await request(`${vars.UPSTREAM_BASE_URL}/openid/v1/jwks`, {
          dispatcher: trusting,
        });
        const keys = createLocalJWKSet((await jwks.body.json()) as never);
        const { payload } = await jwtVerify(minted.out[0]!, keys, {
          issuer: vars.UPSTREAM_BASE_URL,
          audience: 'oauth-sidecar',
        });
        expect(payload.sub).toBe(ME.sub);
      } finally {
        await trusting.close();
      }
    } finally {
      await started.close();
    }
  });

  it('keeps its caller key across runs', async () => {
    freshDir();
    const first = await runStandin(LOCAL, io().io);
    if (typeof first === 'number') throw new Error(`exit ${first}`);
    await first.close();
    const key = readFileSync('standin/caller-key.pem', 'utf8');
    const second = await runStandin(LOCAL, io().io);
    if (typeof second === 'number') throw new Error(`exit ${second}`);
    await second.close();
    expect(readFileSync('standin/caller-key.pem', 'utf8')).toBe(key);
  });

  it('a kept caller key it cannot use is exit 1, naming the file', async () => {
    freshDir();
    mkdirSync('standin');
    writeFileSync('standin/caller-key.pem', 'not a key');
    const { err, io: lines } = io();
    expect(await runStandin(LOCAL, lines)).toBe(1);
    expect(err).toEqual([
      expect.stringMatching(
        /^oauth-sidecar standin: standin\/caller-key\.pem: .*\(remove it for a new key\)$/,
      ),
    ]);
    const minted = io();
    writeFileSync('standin/caller-issuer', 'https://127.0.0.1:1\n');
    expect(await printStandinToken(ME, minted.io)).toBe(1);
    expect(minted.out).toEqual([]);
  });

  it('standin token needs a stand-in started here, and claims it can mint', async () => {
    freshDir();
    const { err, io: lines } = io();
    expect(await printStandinToken(ME, lines)).toBe(1);
    expect(err[0]).toMatch(/start `oauth-sidecar standin` in this directory first$/);
    const started = await runStandin(LOCAL, io().io);
    if (typeof started === 'number') throw new Error(`exit ${started}`);
    await started.close();
    const bad = io();
    expect(await printStandinToken({ ...ME, sub: 'has space' }, bad.io)).toBe(64);
    expect(bad.err).toEqual([
      'oauth-sidecar standin token: the subject must be non-empty, without spaces or control characters',
    ]);
  });
});
