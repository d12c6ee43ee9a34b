/**
 * What ships is what is tested (docs/testing.md "What runs the bundle"). `dist/main.js` keeps the
 * parts only some configurations use behind dynamic import()s, in chunks of their own: a chunk that
 * breaks only in the bundle (as `--config` did: esbuild's chunk for the CommonJS `yaml` package
 * exported only `default`) passes every test that imports the TypeScript sources. Here real
 * processes run the bundle through every lazy path, with `NODE_V8_COVERAGE` (node's public
 * coverage output) naming the files each process loaded, and the last test fails if any chunk
 * the metafile lists was loaded by none of them: a new lazy chunk cannot go untested. The process
 * tests run side by side; the last one reads what they all wrote, after them.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandin, type Standin } from '../src/standin/index.js';
import { startOtlpReceiver } from './helpers/otlp-receiver.js';
import { startTinyproxy } from './helpers/tinyproxy.js';
import { missingRedisServer, startRedisServer, type RedisServer } from './helpers/redis-server.js';
import {
  runCli,
  startDemo,
  startSidecarProcess,
  storeOnceUp,
  tempDir,
  waitFor,
  waitReady,
  writeTemp,
} from './helpers/sidecar-process.js';

const ROOT = join(import.meta.dirname, '..');

interface Metafile {
  outputs: Record<
    string,
    {
      imports: { path: string; kind: string; external?: boolean }[];
      inputs: Record<string, unknown>;
    }
  >;
}

/**
 * OpenTelemetry's machine-id detector imports its platform's module dynamically; the sidecar never
 * runs a resource detector (it sets its resource itself), so these chunks are never loaded.
 */
const NEVER_RUN = 'node_modules/@opentelemetry/resources/build/esm/detectors/';

/** Every chunk `dist/main.js` can load (static and dynamic imports, transitively). */
function chunksOfTheBundle(): Set<string> {
  const meta = JSON.parse(readFileSync(join(ROOT, 'dist', 'bundle-meta.json'), 'utf8')) as Metafile;
  const seen = new Set<string>();
  const pending = ['dist/main.js'];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    for (const imported of meta.outputs[file]?.imports ?? []) {
      if (imported.external !== true && imported.path.startsWith('dist/')) {
        pending.push(imported.path);
      }
    }
  }
  const neverRun = (file: string): boolean =>
    Object.keys(meta.outputs[file]?.inputs ?? {}).every((input) => input.startsWith(NEVER_RUN));
  return new Set([...seen].filter((file) => file.startsWith('dist/chunks/') && !neverRun(file)));
}

/** The coverage directory every process of this file writes to. */
const coverage = tempDir('oauth-sidecar-coverage-');

/** The bundle's chunk files the processes of this file loaded, from their coverage output. */
function chunksLoaded(): Set<string> {
  const loaded = new Set<string>();
  for (const name of readdirSync(coverage)) {
    const report = JSON.parse(readFileSync(join(coverage, name), 'utf8')) as {
      result: { url: string }[];
    };
    for (const { url } of report.result) {
      const marker = url.indexOf('/dist/chunks/');
      if (marker !== -1) loaded.add(`dist/chunks/${basename(url)}`);
    }
  }
  return loaded;
}

let standin: Standin;
let redis: RedisServer | undefined;

beforeAll(async () => {
  const missing = missingRedisServer();
  if (missing !== undefined) throw new Error(missing);
  standin = await startStandin({ clientId: 'bundle-client', clientSecret: 'bundle-secret' });
  redis = await startRedisServer();
});

afterAll(async () => {
  await redis?.close();
  await standin?.close();
});

describe.concurrent('the bundle, through every lazily loaded part', { timeout: 60_000 }, () => {
  it('serves with --config YAML, the Redis store, the quota guard, the shared response cache, tracing and an egress proxy', async () => {
    const receiver = await startOtlpReceiver();
    const egress = await startTinyproxy({ connectPorts: [standin.port] });
    const dir = tempDir();
    const file = join(dir, 'sidecar.yaml');
    writeFileSync(
      file,
      [
        'upstream:',
        `  baseUrl: ${standin.url}`,
        `  caFile: ${writeTemp('ca.pem', standin.caCert)}`,
        '  rateLimit: 100/s',
        'token:',
        '  store:',
        `    url: ${redis!.url}`,
        'proxy:',
        '  listen: 127.0.0.1:0',
        'admin:',
        '  listen: 127.0.0.1:0',
        'cache:',
        '  shared: true',
        '  rules:',
        '    - prefix: /v1.0/contracts/',
        '      ttlSeconds: 60',
        'tracing:',
        `  endpoint: ${receiver.url}`,
        '  scheduleDelayMs: 50',
        'egress:',
        `  proxy: ${egress.url()}`,
        '  noProxy: [example.internal]',
        '',
      ].join('\n'),
    );
    const sidecar = await startSidecarProcess(
      {
        CLIENT_ID: 'bundle-client',
        CLIENT_SECRET: 'bundle-secret',
        NODE_V8_COVERAGE: coverage,
      },
      ['--config', file],
    );
    try {
      // A limit for a hang: the token comes through tinyproxy with the Redis store, tracing and
      // coverage on, in a process started beside the file's other tests.
      await waitReady(sidecar, 30_000);
      const first = await request(`${sidecar.proxyUrl}/v1.0/contracts/`);
      await first.body.text();
      expect(first.statusCode).toBe(200);
      const second = await request(`${sidecar.proxyUrl}/v1.0/contracts/`);
      await second.body.text();
      expect(second.headers['cache-status']).toMatch(/hit/);
      await storeOnceUp(sidecar, 10_000);
      const keys = await redis!.dump();
      expect(keys.size).toBeGreaterThan(0); // the token set (and the quota) went through Redis
      expect([...keys.values()].join('\n')).not.toContain('bundle-secret');
      // The OpenTelemetry chunk: the requests' spans reach the receiver.
      await waitFor(
        () => receiver.spans.some((span) => span.name === 'GET /v1.0/'),
        10_000,
        'a server span at the OTLP receiver',
      );
      // The egress proxy chunk: the token endpoint and the API through its tunnels.
      expect(egress.tunnels().length).toBeGreaterThanOrEqual(2);
    } finally {
      expect(await sidecar.stop()).toBe(0); // a clean exit writes the coverage report
      await receiver.close();
      await egress.close();
    }
  });

  it('serves verified callers (CALLER_AUTH=jwt: jose and src/callers/) with YAML rules and a JWKS file', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwks = writeTemp(
      'jwks.json',
      JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k', alg: 'ES256' }] }),
    );
    const token = await new SignJWT({ sub: 'system:serviceaccount:apps:reports' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k' })
      .setIssuer('https://issuer.example')
      .setAudience('oauth-sidecar')
      .setExpirationTime('10m')
      .sign(privateKey);
    const file = writeTemp(
      'callers.yaml',
      [
        'upstream:',
        `  baseUrl: ${standin.url}`,
        `  caFile: ${writeTemp('ca.pem', standin.caCert)}`,
        'callers:',
        '  auth: jwt',
        '  jwt:',
        '    issuer: https://issuer.example',
        `    jwksFile: ${jwks}`,
        '  rules:',
        '    - subject: "system:serviceaccount:apps:*"',
        '      caller: reports',
        '      methods: [GET]',
        '      paths: [/v1.0/contracts/]',
        '',
      ].join('\n'),
    );
    const sidecar = await startSidecarProcess(
      { CLIENT_ID: 'bundle-client', CLIENT_SECRET: 'bundle-secret', NODE_V8_COVERAGE: coverage },
      ['--config', file],
    );
    try {
      await waitReady(sidecar, 30_000);
      const ok = await request(`${sidecar.proxyUrl}/v1.0/contracts/`, {
        headers: { authorization: `Bearer ${token}` },
      });
      await ok.body.text();
      expect(ok.statusCode).toBe(200);
      const refused = await request(`${sidecar.proxyUrl}/v1.0/contracts/`);
      await refused.body.text();
      expect(refused.statusCode).toBe(401);
    } finally {
      expect(await sidecar.stop()).toBe(0);
    }
  });

  it('runs the demo: the stand-in and its self-signed certificate', async () => {
    const { child, output, exited } = startDemo({ NODE_V8_COVERAGE: coverage });
    try {
      const curl = /curl (http:\/\/127\.0\.0\.1:\d+\/v1\.0\/contracts\/)/;
      await waitFor(() => curl.test(output.text), 45_000, 'the curl line');
      const res = await request(curl.exec(output.text)![1]!);
      await res.body.text();
      expect(res.statusCode).toBe(200);
      child.kill('SIGINT');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('checks a YAML file: a misspelt key and a syntax error exit 78 with their messages', async () => {
    const misspelt = writeTemp('misspelt.yaml', 'upstream:\n  timeoutMS: 5000\n');
    const bad = writeTemp('bad.yaml', 'upstream:\n  baseUrl: [https://x\n');
    const env = { NODE_V8_COVERAGE: coverage };
    const [first, second] = await Promise.all([
      runCli(['check', '--config', misspelt], env),
      runCli(['check', '--config', bad], env),
    ]);
    expect(first.code).toBe(78);
    expect(first.stderr).toContain('did you mean upstream.timeoutMs?');
    expect(first.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(second.code).toBe(78);
    expect(second.stderr).toMatch(/invalid YAML at line \d+, column \d+/);
    expect(second.stderr).not.toMatch(/\n\s+at /);
  });

  it.sequential(
    'left no chunk of the bundle unloaded (a new lazy chunk needs a process test here)',
    () => {
      const loaded = chunksLoaded();
      const unloaded = [...chunksOfTheBundle()].filter((chunk) => !loaded.has(chunk));
      expect(unloaded).toEqual([]);
    },
  );
});
