/**
 * What the serving process loads at start (docs/benchmarks.md "Footprint"): the static import
 * graph of the built `dist/main.js` must not reach the packages and modules that only some
 * configurations or commands use. They stay behind a dynamic `import()` at the point of need:
 * the Redis client with a token store URL, the response cache and lru-cache with cache rules, the
 * YAML parser with `--config`, the stand-in and selfsigned with `demo`. zod and pino-pretty are
 * not loaded at all. Reads the build (`npm test` builds first): that is what a pod runs.
 *
 * The package scan sees `undici` whatever path is imported, so a started sidecar process (token
 * fetched, one request proxied) also reports the files it loaded: undici's package index (fetch,
 * WebSocket, EventSource, cache stores, mock agents: ~13 MiB idle) must not be among them.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { startStandin } from '../src/standin/index.js';
import { startSidecarProcess, tempDir, waitReady, writeTemp } from './helpers/sidecar-process.js';

const DIST = join(import.meta.dirname, '..', 'dist');

/** Package names and dist/ folders (relative to dist/, trailing slash) kept out of the start. */
const NOT_AT_START = ['@redis/client', 'lru-cache', 'yaml', 'selfsigned', 'zod', 'pino-pretty'];
const LOCAL_NOT_AT_START = ['store/', 'standin/', 'proxy/cache/'];

interface ImportGraph {
  /** dist/ files reached by static imports, relative to dist/. */
  files: Set<string>;
  /** Packages imported statically (the specifier as written, e.g. `@hono/node-server/utils/x`). */
  packages: Set<string>;
  /** Every `import('...')` specifier seen in those files, resolved to dist/ paths where relative. */
  dynamic: Set<string>;
}

/** One file's module specifiers: static (import/export ... from, side-effect imports) and dynamic. */
function specifiers(file: string): { static: string[]; dynamic: string[] } {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const found = { static: [] as string[], dynamic: [] as string[] };
  for (const statement of source.statements) {
    if (
      (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
      statement.moduleSpecifier !== undefined &&
      ts.isStringLiteral(statement.moduleSpecifier)
    ) {
      found.static.push(statement.moduleSpecifier.text);
    }
  }
  const visit = (node: ts.Node): void => {
    if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      found.dynamic.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const packageName = (specifier: string): string =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

function staticGraph(entry: string): ImportGraph {
  const graph: ImportGraph = { files: new Set(), packages: new Set(), dynamic: new Set() };
  const pending = [resolve(DIST, entry)];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    const name = relative(DIST, file);
    if (graph.files.has(name)) continue;
    graph.files.add(name);
    const found = specifiers(file);
    for (const specifier of found.static) {
      if (specifier.startsWith('.')) pending.push(resolve(dirname(file), specifier));
      else if (!specifier.startsWith('node:')) graph.packages.add(packageName(specifier));
    }
    for (const specifier of found.dynamic) {
      graph.dynamic.add(
        specifier.startsWith('.')
          ? relative(DIST, resolve(dirname(file), specifier))
          : packageName(specifier),
      );
    }
  }
  return graph;
}

describe('what dist/main.js loads at start', () => {
  const graph = staticGraph('main.js');

  it('reaches the serving modules (the scan itself works)', () => {
    expect(graph.files).toContain('http/start-proxy.js');
    expect([...graph.packages]).toEqual(expect.arrayContaining(['undici', 'pino', 'hono']));
  });

  it('does not statically import what only some configurations or commands use', () => {
    expect([...graph.packages].filter((name) => NOT_AT_START.includes(name))).toEqual([]);
    expect(
      [...graph.files].filter((file) => LOCAL_NOT_AT_START.some((dir) => file.startsWith(dir))),
    ).toEqual([]);
  });

  it('keeps them reachable at the point of need through a dynamic import()', () => {
    expect([...graph.dynamic]).toEqual(
      expect.arrayContaining([
        'yaml',
        'store/index.js',
        'proxy/cache/response-cache.js',
        'standin/index.js',
      ]),
    );
    // Behind those entries, the packages themselves.
    expect(staticGraph('store/index.js').packages).toContain('@redis/client');
    expect(staticGraph('proxy/cache/response-cache.js').packages).toContain('lru-cache');
    expect(staticGraph('standin/index.js').packages).toContain('selfsigned');
  });
});

/** Preloaded with `--require`: writes every CommonJS file the process loaded when it exits. */
const LOADED_FILES_PROBE = `
process.on('exit', () => {
  require('node:fs').writeFileSync(process.env.LOADED_FILES_OUT, JSON.stringify(Object.keys(require.cache)));
});
`;

describe('a started sidecar process', () => {
  it("has not loaded undici's package index, only the dispatcher modules it uses", async () => {
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
      const undiciFiles = loaded.filter((file) => file.includes('/node_modules/undici/'));
      // The probe works: the dispatcher's modules are there.
      expect(undiciFiles.some((file) => file.endsWith('/lib/dispatcher/pool.js'))).toBe(true);
      expect(undiciFiles.filter((file) => file.endsWith('/node_modules/undici/index.js'))).toEqual(
        [],
      );
    } finally {
      await standin.close();
    }
  });
});
