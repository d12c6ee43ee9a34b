// The shipped entry point: src/main.ts and what it imports, bundled by esbuild into dist/main.js
// (run by `npm run build` after tsc, which type-checks and emits the modules scripts/ and bench/
// import; this overwrites tsc's dist/main.js). Why (docs/benchmarks.md "Footprint"): loading 230
// files at start made Node's module resolution hot enough for V8 to optimise its path functions
// with TurboFan, which touched ~6 MiB more of the node binary, and each module costs a record,
// a source string and a resolution. One file: idle RSS 80 -> 73 MiB on the shipped runtime.
//
// What only some configurations or commands use (the Redis client, the response cache, the YAML
// parser, the stand-in and selfsigned) stays behind its dynamic import(), in chunks of its own
// under dist/chunks/, loaded at the point of need (test/startup-imports.test.ts reads the
// metafile written here). pino stays a package: its pretty transport runs pino-pretty in a worker
// thread by file name. Not minified: stack traces keep their names, and a source map is written.
import { build } from 'esbuild';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..'); // Node >= 20.11, below the engines floor
const dist = join(root, 'dist');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

rmSync(join(dist, 'chunks'), { recursive: true, force: true });
const result = await build({
  absWorkingDir: root,
  entryPoints: { main: 'src/main.ts' },
  outdir: 'dist',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  // A package's ES module build where it has one: tree-shaken (OpenTelemetry's chunk is a fifth of
  // its CommonJS size, docs/design.md "Dependencies").
  mainFields: ['module', 'main'],
  target: 'node20.19',
  tsconfig: 'tsconfig.build.json',
  external: ['pino', 'pino-pretty'],
  // src/version.ts: the version is package.json's at build time.
  define: { OAUTH_SIDECAR_BUILD_VERSION: JSON.stringify(version) },
  // CommonJS packages in an ES module bundle call require() for node's built-in modules.
  banner: {
    js: "import { createRequire as __sidecarCreateRequire } from 'node:module';\nconst require = __sidecarCreateRequire(import.meta.url);",
  },
  sourcemap: 'linked',
  metafile: true,
  allowOverwrite: true,
  logLevel: 'warning',
});
writeFileSync(join(dist, 'bundle-meta.json'), JSON.stringify(result.metafile));
