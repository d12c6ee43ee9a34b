/**
 * End-to-end: the real `oauth-sidecar` process (dist/main.js, built by `npm test`) against the
 * stand-in API over HTTPS. Exit codes, printed lines, drain on SIGTERM, and logs without secrets.
 * The tests run side by side (each waits mostly on its own processes); one that changes what the
 * API or its token endpoint does, or counts their requests, has a stand-in of its own.
 */
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it, type TestContext } from 'vitest';
import { startStandin, type Standin } from '../src/standin/index.js';
import {
  runCli,
  startDemo,
  startSidecarProcess,
  tempDir,
  waitFor,
  waitReady,
  writeTemp,
  useStandin,
} from './helpers/sidecar-process.js';

const SECRET = 'demo-secret';
const api = useStandin({ clientId: 'demo-client', clientSecret: SECRET });

function baseEnv(): Record<string, string> {
  return {
    UPSTREAM_BASE_URL: api.standin.url,
    UPSTREAM_CA_FILE: api.caFile,
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: SECRET,
  };
}

function expectNoSecrets(text: string, standin: Standin = api.standin): void {
  expect(text).not.toContain(SECRET);
  for (const token of standin.issuedTokens()) expect(text).not.toContain(token);
}

/**
 * Side by side on a loaded 2-core machine each test waits longer for its processes: a limit for
 * hangs, never asserted.
 */
const SIDE_BY_SIDE = { timeout: 60_000 };

/** A stand-in of the test's own (closed when it finishes), and the environment that points at it. */
async function ownStandin(
  test: TestContext,
): Promise<{ standin: Standin; env: Record<string, string> }> {
  const standin = await startStandin({ clientId: 'demo-client', clientSecret: SECRET });
  test.onTestFinished(() => standin.close());
  return {
    standin,
    env: {
      UPSTREAM_BASE_URL: standin.url,
      UPSTREAM_CA_FILE: writeTemp('ca.pem', standin.caCert),
      CLIENT_ID: 'demo-client',
      CLIENT_SECRET: SECRET,
    },
  };
}

describe.concurrent('bad configuration', SIDE_BY_SIDE, () => {
  it('lists every problem on stderr, one line each, exits 78, prints no secret and listens nowhere', async () => {
    const secret = 'sup3r-s3cret-value';
    const result = await runCli([], {
      CLIENT_ID: 'id',
      CLIENT_SECRET: secret,
      CLIENT_CREDENTIALS_CSV: '/nonexistent/creds.csv',
      UPSTREAM_TIMEOUT_MS: 'soon',
      TOKEN_REQUEST_FORMAT: 'xml',
      LOG_LEVEL: 'loud',
      PROXY_LISTEN: '127.0.0.1:0',
      ADMIN_LISTEN: '127.0.0.1:0',
    });
    expect(result.code).toBe(78);
    const lines = result.stderr.trim().split('\n');
    expect(lines[0]).toMatch(/invalid configuration/);
    for (const key of [
      'UPSTREAM_BASE_URL',
      'UPSTREAM_TIMEOUT_MS',
      'TOKEN_REQUEST_FORMAT',
      'LOG_LEVEL',
      'CLIENT_CREDENTIALS_CSV',
    ]) {
      expect(lines.filter((l) => l.includes(key)).length, `a line naming ${key}`).toBeGreaterThan(
        0,
      );
    }
    expect(result.stdout + result.stderr).not.toContain(secret);
    expect(result.stdout).not.toContain('listening');
  });

  it('refuses inconsistent store settings (mode, hosts, Sentinel, db) all at once, exit 78, no password', async () => {
    const run = (env: Record<string, string>) =>
      runCli(['check'], {
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID: 'id',
        CLIENT_SECRET: SECRET,
        ...env,
      });
    const [standalone, cluster, sentinel, unknown] = await Promise.all([
      run({
        STORE_URL: 'redis://:store-pw@127.0.0.1:7000,127.0.0.1:7001',
        STORE_SENTINEL_PASSWORD: 'sentinel-pw',
      }),
      run({ STORE_MODE: 'cluster', STORE_URL: 'redis://127.0.0.1:7000/2' }),
      run({ STORE_MODE: 'sentinel', STORE_URL: 'redis://127.0.0.1:26379' }),
      run({ STORE_MODE: 'sharded', STORE_URL: 'redis://127.0.0.1:7000' }),
    ]);
    for (const result of [standalone, cluster, sentinel, unknown]) {
      expect(result.code).toBe(78);
      expect(result.stdout + result.stderr).not.toMatch(/store-pw|sentinel-pw/);
    }
    const lines = (result: { stderr: string }) =>
      result.stderr
        .trim()
        .split('\n')
        .slice(1)
        .map((line) => line.replace(/^\s*- /, ''));
    expect(lines(standalone)).toEqual([
      expect.stringMatching(/^STORE_URL \(store\.url\): names 2 hosts, but STORE_MODE/),
      expect.stringMatching(/^STORE_SENTINEL_PASSWORD \(store\.sentinelPassword\): only used with/),
    ]);
    expect(lines(cluster)).toEqual([expect.stringMatching(/^STORE_URL .*names database 2/)]);
    expect(lines(sentinel)).toEqual([
      expect.stringMatching(/^STORE_SENTINEL_PRIMARY \(store\.sentinelPrimary\): required/),
    ]);
    expect(lines(unknown)).toEqual([
      expect.stringMatching(/^STORE_MODE \(store\.mode\): must be one of/),
    ]);
  });

  it('refuses an http:// upstream with exit 78', async () => {
    const result = await runCli(['check'], {
      ...baseEnv(),
      UPSTREAM_BASE_URL: 'http://127.0.0.1:1',
    });
    expect(result.code).toBe(78);
    expect(result.stderr).toContain('UPSTREAM_BASE_URL');
    expect(result.stderr).toMatch(/https/);
  });

  it('a YAML alias bomb hits the parser limit: exit 78, one line naming the file, no stack', async () => {
    const levels = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]'];
    for (const [name, below] of [
      ['b', 'a'],
      ['c', 'b'],
      ['d', 'c'],
      ['e', 'd'],
    ])
      levels.push(`${name}: &${name} [${Array(10).fill(`*${below}`).join(',')}]`);
    const file = writeTemp('bomb.yaml', `${levels.join('\n')}\n`);
    const result = await runCli(['check', '--config', file], baseEnv());
    expect(result.code).toBe(78);
    expect(result.stderr).toContain(file);
    expect(result.stderr).toMatch(/alias/i);
    expect(result.stderr).not.toMatch(/^\s+at /m);
    expect(result.stderr).not.toContain('Error');
  });

  it('keys named like Object.prototype members get no "did you mean" made from them', async () => {
    const file = writeTemp(
      'proto.yaml',
      '__proto__:\n  x: 1\ntoString: 1\nupstream:\n  constructor: 2\n',
    );
    const result = await runCli(['check', '--config', file], baseEnv());
    expect(result.code).toBe(78);
    const lines = result.stderr.split('\n');
    for (const key of ['__proto__', 'toString', 'upstream.constructor']) {
      const line = lines.find((l) => l.includes(`${key}: unknown key`));
      expect(line, key).toBeDefined();
      expect(line).not.toContain('did you mean');
    }
  });

  it('answers an unknown command with usage and exit 64', async () => {
    const result = await runCli(['frobnicate'], {});
    expect(result.code).toBe(64);
    expect(result.stderr).toContain('unknown command frobnicate');
    expect(result.stderr).toContain('usage: oauth-sidecar');
  });
});

describe.concurrent('oauth-sidecar check', SIDE_BY_SIDE, () => {
  it('prints grant, token type, lifetime and refresh token, never the token, and exits 0', async () => {
    const result = await runCli(['check'], baseEnv());
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('grant: client_credentials\n');
    expect(result.stdout).toContain('token type: Bearer\n');
    expect(result.stdout).toContain('expires in: 1799 s\n');
    expect(result.stdout).toContain('refresh token: yes\n');
    expectNoSecrets(result.stdout);
  });

  it('works with the form format and Basic client authentication', async (test) => {
    const own = await ownStandin(test);
    const result = await runCli(['check'], {
      ...own.env,
      TOKEN_REQUEST_FORMAT: 'form',
      TOKEN_CLIENT_AUTH: 'basic',
    });
    expect(result.code).toBe(0);
    const sent = own.standin.tokenRequests;
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      format: 'form',
      auth: 'basic',
      grant: 'client_credentials',
      outcome: 'issued',
    });
  });

  it('a wrong secret gives exit 1 and a one-line reason without the secret', async () => {
    const result = await runCli(['check'], { ...baseEnv(), CLIENT_SECRET: 'wrong-secret-123' });
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/401/);
    expect(lines[0]).toMatch(/invalid_client/);
    expect(result.stdout + result.stderr).not.toContain('wrong-secret-123');
  });

  it("without the stand-in's CA, the certificate error names UPSTREAM_CA_FILE", async () => {
    const { UPSTREAM_CA_FILE: _ca, ...withoutCa } = baseEnv();
    const result = await runCli(['check'], withoutCa);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN/);
    expect(result.stderr).toContain('set UPSTREAM_CA_FILE (upstream.caFile)');
  });
});

describe.concurrent('oauth-sidecar serve', SIDE_BY_SIDE, () => {
  it('proxies with the kept token, reports ready, drains on SIGTERM and exits 0, logging no secret', async () => {
    const sidecar = await startSidecarProcess(baseEnv());
    try {
      await waitReady(sidecar);

      const contracts = await request(`${sidecar.proxyUrl}/v1.0/contracts/?kept-token`, {
        headers: { authorization: 'Bearer client-supplied' },
      });
      expect(contracts.statusCode).toBe(200);
      expect(await contracts.body.json()).toMatchObject({ data: expect.any(Array) });
      const upstreamSaw = api.standin.apiRequests.find((r) => r.url.includes('kept-token'))!;
      expect(upstreamSaw.token).toBeDefined();
      expect(upstreamSaw.token).not.toBe('client-supplied');

      const status = (await (await request(`${sidecar.adminUrl}/status`)).body.json()) as Record<
        string,
        unknown
      >;
      expect(status).toMatchObject({ ready: true, draining: false });
      expectNoSecrets(JSON.stringify(status));

      // A slow request in flight, and an idle keep-alive connection opened before the signal.
      const slow = request(`${sidecar.proxyUrl}/v1.0/slow/1500`);
      const [host, port] = sidecar.proxyUrl.slice('http://'.length).split(':');
      const idle = connect(Number(port), host);
      await new Promise((resolve) => idle.once('connect', resolve));
      await waitFor(
        async () => {
          const text = await (await request(`${sidecar.adminUrl}/metrics`)).body.text();
          return /^oauth_sidecar_requests_in_flight 1$/m.test(text);
        },
        5000,
        'the slow request in flight',
      );

      sidecar.child.kill('SIGTERM');
      await waitFor(
        async () => {
          const res = await request(`${sidecar.adminUrl}/readyz`).catch(() => undefined);
          return res?.statusCode === 503;
        },
        3000,
        'readyz 503 while draining',
      );

      // A new request on the already-open connection gets 503 shutting_down in the envelope.
      const answer = await new Promise<string>((resolve) => {
        let data = '';
        idle.on('data', (d: Buffer) => (data += d.toString()));
        idle.on('close', () => resolve(data));
        idle.on('end', () => resolve(data));
        idle.write(
          'GET /v1.0/contracts/ HTTP/1.1\r\nHost: x\r\nX-Request-Id: drain-check\r\nConnection: close\r\n\r\n',
        );
      });
      expect(answer).toMatch(/^HTTP\/1\.1 503/);
      expect(answer).toContain('"code":"shutting_down"');
      expect(answer).toContain('"requestId":"drain-check"');

      const slowAnswer = await slow;
      expect(slowAnswer.statusCode).toBe(200);
      expect(await slowAnswer.body.json()).toMatchObject({ waitedMs: 1500 });

      expect(await sidecar.exited).toBe(0);
      const logs = sidecar.stdout.join('\n') + sidecar.stderr.join('');
      expect(logs).toContain('"requestId":"drain-check"');
      expectNoSecrets(logs);
    } finally {
      await sidecar.stop('SIGKILL');
    }
  });

  it('follows a Kubernetes Secret rotation (..data symlink swap) on the next client-credentials grant', async (test) => {
    const own = await ownStandin(test);
    // The layout the kubelet writes for a Secret volume.
    const dir = tempDir('oauth-sidecar-secret-');
    const writeVersion = (name: string, secret: string): void => {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, 'client-id'), 'demo-client\n');
      writeFileSync(join(dir, name, 'client-secret'), `${secret}\n`);
    };
    writeVersion('..2026_11_22_01', SECRET);
    symlinkSync('..2026_11_22_01', join(dir, '..data'));
    symlinkSync('..data/client-id', join(dir, 'client-id'));
    symlinkSync('..data/client-secret', join(dir, 'client-secret'));

    const { CLIENT_ID: _id, CLIENT_SECRET: _secret, ...env } = own.env;
    const sidecar = await startSidecarProcess({
      ...env,
      CLIENT_ID_FILE: join(dir, 'client-id'),
      CLIENT_SECRET_FILE: join(dir, 'client-secret'),
    });
    const rotated = 'rotated-secret-2';
    try {
      await waitReady(sidecar);

      // Reset in the portal, then the kubelet swaps ..data atomically.
      own.standin.setClientSecret(rotated);
      writeVersion('..2026_11_22_02', rotated);
      symlinkSync('..2026_11_22_02', join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));

      // Everything the sidecar holds dies: the next request's 401 forces a renewal, the refresh grant
      // is rejected, and client credentials must be re-read from the swapped files.
      own.standin.revokeAccessTokens();
      own.standin.revokeRefreshTokens();
      const before = own.standin.tokenRequests.length;
      const res = await request(`${sidecar.proxyUrl}/v1.0/contracts/`);
      expect(res.statusCode).toBe(200);
      await res.body.text();
      const grants = own.standin.tokenRequests.slice(before);
      expect(grants.at(-1)).toMatchObject({
        grant: 'client_credentials',
        secretOk: true,
        outcome: 'issued',
      });
      expect(grants.some((g) => g.grant === 'client_credentials' && !g.secretOk)).toBe(false);

      await sidecar.stop();
      const logs = sidecar.stdout.join('\n') + sidecar.stderr.join('');
      expect(logs).toContain('client credentials changed');
      // The client id is never logged either, only the pair's fingerprints.
      expect(logs).not.toContain('demo-client');
      expectNoSecrets(logs, own.standin);
      expect(logs).not.toContain(rotated);
    } finally {
      await sidecar.stop('SIGKILL');
    }
  });

  it('replays a request whose token a renewal replaced and which expired on its way: the client sees 200', async (test) => {
    const own = await ownStandin(test);
    own.standin.setTokenLifetime(4);
    const issuedBefore = own.standin.issuedTokens().length;
    const sidecar = await startSidecarProcess(own.env);
    try {
      await waitReady(sidecar);
      const first = own.standin.tokenRequests.filter((r) => r.outcome === 'issued').at(-1)!;
      const firstToken = own.standin
        .issuedTokens()
        .slice(issuedBefore)
        .find((t) => t.startsWith('at_'))!;
      const apiBefore = own.standin.apiRequests.length;

      // The sidecar takes its token when the request arrives, then buffers the (small) body.
      const proxy = new URL(sidecar.proxyUrl);
      const body = 'late body';
      const sent = new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = httpRequest(
          {
            host: proxy.hostname,
            port: proxy.port,
            method: 'POST',
            path: '/v1.0/echo/late',
            headers: { 'content-type': 'text/plain', 'content-length': body.length },
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => (text += d));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on('error', reject);
        req.write(body.slice(0, 4));
        // The scheduled renewal (at about half the 4 s lifetime) replaces the token, and the old
        // one expires at the stand-in, before the rest of the body arrives.
        void waitFor(
          () => own.standin.tokenRequests.some((r) => r.outcome === 'issued' && r.at > first.at),
          10_000,
          'a scheduled renewal',
        )
          .then(() =>
            waitFor(
              () => !own.standin.accessTokenValid(firstToken),
              10_000,
              'the first token expired',
            ),
          )
          .then(() => req.end(body.slice(4)), reject);
      });
      const res = await sent;

      expect(res.status).toBe(200);
      expect(JSON.parse(res.text)).toMatchObject({ method: 'POST', bodyBytes: body.length });
      const seen = own.standin.apiRequests.slice(apiBefore);
      expect(seen.map((r) => r.status)).toEqual([401, 200]);
      expect(seen[0]!.token).not.toBe(seen[1]!.token);
      const metrics = await (await request(`${sidecar.adminUrl}/metrics`)).body.text();
      expect(metrics).toMatch(/^oauth_sidecar_upstream_unauthorized_total\{replayed="true"\} 1$/m);
    } finally {
      await sidecar.stop('SIGKILL');
    }
  });

  it('a 401 while backoff forbids a renewal gives the client 503 token_unavailable, not the 401', async (test) => {
    const own = await ownStandin(test);
    own.standin.setTokenLifetime(4);
    const sidecar = await startSidecarProcess({ ...own.env, TOKEN_WAIT_MS: '300' });
    try {
      await waitReady(sidecar);
      // The token endpoint goes down: the scheduled renewal (about 2 s in) fails with Retry-After
      // 30, so the keeper is in backoff while its token is still valid.
      const tokensBefore = own.standin.tokenRequests.length;
      own.standin.failTokenRequests({ kind: 'status', status: 503, retryAfter: '30' }, Infinity);
      await waitFor(
        () => own.standin.tokenRequests.slice(tokensBefore).some((r) => r.outcome === 'fault'),
        10_000,
        'the failed renewal',
      );
      const tokensAfterFailure = own.standin.tokenRequests.length;
      // Then the API rejects that token.
      own.standin.revokeAccessTokens();
      const apiBefore = own.standin.apiRequests.length;

      const res = await request(`${sidecar.proxyUrl}/v1.0/contracts/`);
      const body = (await res.body.json()) as { errors: { code: string }[] };

      expect(res.statusCode).toBe(503);
      expect(body.errors[0]!.code).toBe('token_unavailable');
      // Retry-After 30 s, but the 401 left no valid token: the wait is pulled in to 8 s.
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(7);
      expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(8);
      expect(own.standin.apiRequests.slice(apiBefore).map((r) => r.status)).toEqual([401]);
      expect(own.standin.tokenRequests).toHaveLength(tokensAfterFailure); // backoff honoured
      const metrics = await (await request(`${sidecar.adminUrl}/metrics`)).body.text();
      expect(metrics).toMatch(/^oauth_sidecar_upstream_unauthorized_total\{replayed="true"\} 1$/m);
    } finally {
      await sidecar.stop('SIGKILL');
    }
  });

  it('exits 1 with one line naming the address and the fix, no stack, when the proxy port is taken', async () => {
    const first = await startSidecarProcess(baseEnv());
    try {
      const taken = first.proxyUrl.slice('http://'.length);
      const result = await runCli([], {
        ...baseEnv(),
        PROXY_LISTEN: taken,
        ADMIN_LISTEN: '127.0.0.1:0',
      });
      expect(result.code).toBe(1);
      const output = `${result.stdout}${result.stderr}`;
      const lines = output.split('\n').filter((line) => line.includes(taken));
      expect(lines).toHaveLength(1);
      const line = JSON.parse(lines[0]!) as Record<string, unknown>;
      expect(line).toMatchObject({
        level: 'fatal',
        event: 'listen',
        setting: 'PROXY_LISTEN',
        address: taken,
        msg: `cannot start: PROXY_LISTEN (proxy.listen) ${taken}: address already in use (another process, e.g. a second sidecar or demo, listens there); set PROXY_LISTEN to a free address`,
      });
      expect(line).not.toHaveProperty('err');
      expect(output).not.toMatch(/\n\s+at |"stack"/);
    } finally {
      await first.stop();
    }
  });
});

describe.concurrent('oauth-sidecar demo', SIDE_BY_SIDE, () => {
  it('passes every setting through (cache, rate limit), lists the routes, and a second demo on its ports names the setting', async () => {
    const first = startDemo({
      CACHE_RULES: '/v1.0/contracts/=60',
      UPSTREAM_RATE_LIMIT: '50/s',
      CLIENT_ID: 'not-used',
    });
    try {
      const banner =
        /curl (http:\/\/127\.0\.0\.1:(\d+))\/v1\.0\/contracts\/\n[\s\S]*Status: curl (http:\/\/127\.0\.0\.1:(\d+))\/status/;
      await waitFor(() => banner.test(first.output.text), 45_000, 'the banner');
      const [, proxyUrl, proxyPort, adminUrl, adminPort] = banner.exec(first.output.text)!;
      expect(first.output.text).toContain('/v1.0/status/429?retry-after=30');
      expect(first.output.text).toContain('Cache: /v1.0/contracts/=60s');
      expect(first.output.text).toContain('Rate limit: 50 per 1 s');
      expect(first.output.text).toContain("Ignored (the demo uses the stand-in's): CLIENT_ID");
      const status = (await (await request(`${adminUrl!}/status`)).body.json()) as {
        cache: { enabled: boolean; rules: number };
        quota: { rateLimit: { count: number; periodSeconds: number } | null };
      };
      expect(status.cache).toMatchObject({ enabled: true, rules: 1 });
      expect(status.quota.rateLimit).toMatchObject({ count: 50, periodSeconds: 1 });
      for (const expected of [/fwd=uri-miss; stored/, /hit/]) {
        const res = await request(`${proxyUrl!}/v1.0/contracts/`);
        await res.body.text();
        expect(res.statusCode).toBe(200);
        expect(res.headers['cache-status']).toMatch(expected);
      }

      const second = startDemo({
        PROXY_LISTEN: `127.0.0.1:${proxyPort!}`,
        ADMIN_LISTEN: `127.0.0.1:${adminPort!}`,
      });
      try {
        expect(await second.exited).not.toBe(0);
        expect(second.output.text).toMatch(
          new RegExp(
            `PROXY_LISTEN \\(proxy\\.listen\\) 127\\.0\\.0\\.1:${proxyPort!}: address already in use`,
          ),
        );
        expect(second.output.text).not.toMatch(/\n\s+at /);
      } finally {
        second.child.kill('SIGKILL');
      }
      first.child.kill('SIGINT');
      expect(await first.exited).toBe(0);
    } finally {
      first.child.kill('SIGKILL');
    }
  });

  it('starts the stand-in and the sidecar with no configuration and prints a curl line that works', async () => {
    const { child, output, exited } = startDemo();
    try {
      await waitFor(
        () => /curl (http:\/\/127\.0\.0\.1:\d+\/v1\.0\/contracts\/)/.test(output.text),
        45_000,
        'the curl line',
      );
      const url = /curl (http:\/\/127\.0\.0\.1:\d+\/v1\.0\/contracts\/)/.exec(output.text)![1]!;
      let res = await request(url);
      // The first request may wait (up to token.waitMs) for the first token: it still answers 200.
      expect(res.statusCode).toBe(200);
      expect(await res.body.json()).toMatchObject({ data: expect.any(Array) });
      res = await request(url, { headers: { accept: 'text/csv' } });
      expect(res.headers['content-type']).toMatch(/text\/csv/);
      await res.body.text();
      child.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(output.text).not.toContain('demo-secret');
      // Its output is a pipe here: pino-pretty's lines, with no ANSI colour codes.
      expect(output.text).toMatch(/INFO.*demo: stand-in API started/);
      expect(output.text).not.toContain('\u001b[');
    } finally {
      child.kill('SIGKILL');
    }
  });
});
