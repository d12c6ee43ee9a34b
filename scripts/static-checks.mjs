// The static checks of `npm test`, side by side: typecheck, eslint, prettier and the build are
// independent of each other and measure no time. The build's tsc only emits (`--noCheck`): the
// typecheck beside it checks src with the same compiler options (tsconfig.json includes src), and
// with `isolatedModules` and `verbatimModuleSyntax` the emitted JavaScript does not depend on
// types. `npm run build` alone still type-checks. Each check's output is printed when it ends, the
// failed ones named at the end; exit 1 if any failed.
//
//   node scripts/static-checks.mjs [--only typecheck,eslint,prettier,build]
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const root = join(import.meta.dirname, '..');
const bin = (name) => join(root, 'node_modules', '.bin', name);

/** name → the commands it runs, one after another. */
const CHECKS = {
  typecheck: [[bin('tsc'), '--noEmit']],
  eslint: [[bin('eslint'), '--max-warnings', '0', '.']],
  prettier: [[bin('prettier'), '--check', '.']],
  build: [
    [bin('tsc'), '-p', 'tsconfig.build.json', '--noCheck'],
    [process.execPath, join(root, 'scripts', 'bundle.mjs')],
  ],
};

/** One command; its output collected. */
function run([command, ...args]) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.once('error', (error) => resolve({ ok: false, output: `${output}${error.message}\n` }));
    child.once('close', (code) => resolve({ ok: code === 0, output }));
  });
}

async function check(name) {
  const started = Date.now();
  let output = '';
  for (const command of CHECKS[name]) {
    const result = await run(command);
    output += result.output;
    if (!result.ok) return { name, ok: false, output, seconds: (Date.now() - started) / 1000 };
  }
  return { name, ok: true, output, seconds: (Date.now() - started) / 1000 };
}

const { values } = parseArgs({ options: { only: { type: 'string' } } });
const names = values.only?.split(',') ?? Object.keys(CHECKS);
const unknown = names.filter((n) => !(n in CHECKS));
if (unknown.length > 0) {
  console.error(`unknown check: ${unknown.join(', ')} (known: ${Object.keys(CHECKS).join(', ')})`);
  process.exit(2);
}

const failed = [];
await Promise.all(
  names.map(async (name) => {
    const result = await check(name);
    if (result.output.trim() !== '') process.stdout.write(result.output);
    console.log(`${result.ok ? 'ok' : 'FAILED'}: ${name} (${result.seconds.toFixed(0)} s)`);
    if (!result.ok) failed.push(name);
  }),
);
if (failed.length > 0) {
  console.error(`static checks failed: ${failed.join(', ')}`);
  process.exit(1);
}
