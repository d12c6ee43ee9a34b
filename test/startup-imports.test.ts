/**
 * What the serving process loads at start (docs/benchmarks.md "Footprint"). The shipped entry
 * point is one esbuild bundle (`scripts/bundle.mjs`, run by `npm run build`): `dist/main.js` and
 * the chunks it imports statically must not contain the packages and modules that only some
 * configurations or commands use. They stay behind a dynamic `import()` at the point of need, in
 * chunks of their own: the Redis client with a token store URL, the response cache and lru-cache
 * with cache rules, the YAML parser with `--config`, the stand-in and selfsigned with `demo`,
 * OpenTelemetry's SDK and exporters with an OTLP endpoint (src/telemetry/otel.ts). zod
 * and pino-pretty are not loaded at all, nor undici's package index (fetch, WebSocket,
 * EventSource, cache stores, mock agents: ~13 MiB idle). Reads the build's metafile (`npm test`
 * builds first), checked against the files on disk: that is what a pod runs.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { startStandin } from '../src/standin/index.js';
import { startSidecarProcess, tempDir, waitReady, writeTemp } from './helpers/sidecar-process.js';

const ROOT = join(import.meta.dirname, '..');

/** Packages (node_modules/<name>/) and source folders kept out of the start. */
const NOT_AT_START = [
  '@redis/client',
  'lru-cache',
  'yaml',
  'selfsigned',
  'jose',
  'zod',
  'pino-pretty',
  // Tracing's SDK. (@opentelemetry/api itself is loaded by prom-client at start: its
  // lib/metrics/processCpuTotal.js requires it for exemplars.)
  '@opentelemetry/sdk-trace',
  '@opentelemetry/resources',
  '@opentelemetry/otlp-transformer',
  '@opentelemetry/core',
  '@opentelemetry/otlp-exporter-base',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/exporter-trace-otlp-proto',
  '@opentelemetry/sdk-logs',
  '@opentelemetry/sdk-metrics',
];
const LOCAL_NOT_AT_START = [
  'src/fleet/',
  'src/standin/',
  'src/proxy/cache/',
  'src/callers/',
  'src/telemetry/otel.ts',
  'src/telemetry/otel-export.ts',
  'src/proxy/egress-agent.ts',
  'node_modules/undici/lib/dispatcher/proxy-agent.js',
  'node_modules/undici/lib/api/',
];

interface Metafile {
  outputs: Record<
    string,
    {
      bytes: number;
      entryPoint?: string;
      inputs: Record<string, unknown>;
      imports: { path: string; kind: string; external?: boolean }[];
    }
  >;
}

const meta = JSON.parse(readFileSync(join(ROOT, 'dist', 'bundle-meta.json'), 'utf8')) as Metafile;

/** The output files loaded with `entry` (its static imports, transitively), and their inputs. */
function loadedWith(entry: string): {
  outputs: Set<string>;
  inputs: Set<string>;
  dynamic: Set<string>;
} {
  const outputs = new Set<string>();
  const dynamic = new Set<string>();
  const pending = [entry];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (outputs.has(file)) continue;
    const output = meta.outputs[file];
    if (output === undefined) throw new Error(`${file} is not in the metafile`);
    outputs.add(file);
    for (const imported of output.imports) {
      if (imported.external === true) continue;
      if (imported.kind === 'import-statement') pending.push(imported.path);
      if (imported.kind === 'dynamic-import') dynamic.add(imported.path);
    }
  }
  const inputs = new Set([...outputs].flatMap((file) => Object.keys(meta.outputs[file]!.inputs)));
  return { outputs, inputs, dynamic };
}

/** The output whose entry point (the module a dynamic import() names) is `input`. */
const chunkOf = (input: string): string => {
  const found = Object.entries(meta.outputs).find(([, output]) => output.entryPoint === input);
  if (found === undefined) throw new Error(`no chunk has ${input} as its entry`);
  return found[0];
};

const fromPackage = (inputs: Set<string>, name: string): string[] =>
  [...inputs].filter((input) => input.startsWith(`node_modules/${name}/`));

describe('what dist/main.js loads at start', () => {
  const start = loadedWith('dist/main.js');

  it('is the bundle the build wrote (the metafile matches the files on disk)', () => {
    expect(meta.outputs['dist/main.js']?.entryPoint).toBe('src/main.ts');
    for (const file of start.outputs) {
      expect(statSync(join(ROOT, file)).size, file).toBe(meta.outputs[file]!.bytes);
    }
  });

  it('contains the serving modules (the scan itself works)', () => {
    expect(start.inputs).toContain('src/http/start-proxy.ts');
    expect(start.inputs).toContain('node_modules/undici/lib/dispatcher/pool.js');
    for (const name of ['hono', 'prom-client']) {
      expect(fromPackage(start.inputs, name).length, name).toBeGreaterThan(0);
    }
  });

  it("does not contain what only some configurations or commands use, nor undici's index", () => {
    expect(NOT_AT_START.flatMap((name) => fromPackage(start.inputs, name))).toEqual([]);
    expect(
      [...start.inputs].filter((input) => LOCAL_NOT_AT_START.some((dir) => input.startsWith(dir))),
    ).toEqual([]);
    expect(start.inputs).not.toContain('node_modules/undici/index.js');
  });

  it('keeps them reachable at the point of need through a dynamic import()', () => {
    const lazy = {
      'src/fleet/index.ts': '@redis/client',
      'src/proxy/cache/response-cache.ts': 'lru-cache',
      'src/standin/index.ts': 'selfsigned',
      'src/config/yaml.ts': 'yaml',
    };
    // The egress proxy's agent (with HTTPS_PROXY): undici's ProxyAgent from the package's index,
    // in a chunk of its own.
    const egress = chunkOf('src/proxy/egress-agent.ts');
    expect(start.dynamic).toContain(egress);
    expect(loadedWith(egress).inputs).toContain('node_modules/undici/index.js');
    expect(loadedWith(egress).inputs).toContain(
      'node_modules/undici/lib/dispatcher/proxy-agent.js',
    );
    for (const [input, name] of Object.entries(lazy)) {
      const chunk = chunkOf(input);
      expect(start.dynamic, input).toContain(chunk);
      expect(fromPackage(loadedWith(chunk).inputs, name).length, name).toBeGreaterThan(0);
    }
  });
});

/** Preloaded with `--require`: writes every CommonJS file the process loaded when it exits. */
const LOADED_FILES_PROBE = `
process.on('exit', () => {
  require('node:fs').writeFileSync(process.env.LOADED_FILES_OUT, JSON.stringify(Object.keys(require.cache)));
});
`;

describe('a started sidecar process', () => {
  it('runs from the bundle: no undici file is loaded from node_modules', async () => {
    const standin = await startStandin();
    try {
      const dir = tempDir();
      const probe = join(dir, 'probe.cjs');
      const out = join(dir, 'loaded.json');
      writeFileSync(probe, LOADED_FILES_PROBE);
      const sidecar = await startSidecarProcess({
        UPSTREAM_BASE_URL: standin.url,
        UPSTREAM_CA_FILE: writeTemp('ca.pem', standin.caCert),
        CLIENT_ID: 'demo-client',
        CLIENT_SECRET: 'demo-secret',
        NODE_OPTIONS: `--require ${probe}`,
        LOADED_FILES_OUT: out,
      });
      try {
        await waitReady(sidecar); // the token client has run
        const res = await request(`${sidecar.proxyUrl}/v1.0/contracts/`);
        await res.body.text();
        expect(res.statusCode).toBe(200); // the upstream pool has run
      } finally {
        await sidecar.stop();
      }
      const loaded = (JSON.parse(readFileSync(out, 'utf8')) as string[]).map((file) =>
        file.replaceAll('\\', '/'),
      );
      // The probe works: pino, which stays a package, was loaded through require().
      expect(loaded.some((file) => file.includes('/node_modules/pino/'))).toBe(true);
      expect(loaded.filter((file) => file.includes('/node_modules/undici/'))).toEqual([]);
    } finally {
      await standin.close();
    }
  });
});
