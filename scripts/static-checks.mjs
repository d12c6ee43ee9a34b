// The static checks of `npm test`, side by side: typecheck, eslint, prettier and the build are
// independent of each other and measure no time. The typecheck and eslint share one process and
// one TypeScript program (scripts/typed-checks.mjs says why): eslint's type-aware rules would
// otherwise build and check the whole program again. The build's tsc only emits (`--noCheck`):
// the typecheck beside it checks src with the same compiler options (tsconfig.json includes src),
// and with `isolatedModules` and `verbatimModuleSyntax` the emitted JavaScript does not depend on
// types. `npm run build` alone still type-checks. Each check's output is printed when it ends, the
// failed ones named at the end; exit 1 if any failed.
//
//   node scripts/static-checks.mjs [--only typecheck,eslint,prettier,build]
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const root = join(import.meta.dirname, '..');
const bin = (name) => join(root, 'node_modules', '.bin', name);

/** The checks scripts/typed-checks.mjs runs, in one process over one program. */
const TYPED = ['typecheck', 'eslint'];

/** name → the commands it runs, one after another; `typed`: see TYPED. */
const CHECKS = {
  typecheck: 'typed',
  eslint: 'typed',
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

/**
 * The typed checks named in `typed`, one process: each result reported as it comes (a message
 * from scripts/typed-checks.mjs); one that never came failed, with the process's output.
 */
function typedChecks(typed, report) {
  const started = Date.now();
  const script = join(root, 'scripts', 'typed-checks.mjs');
  const child = spawn(process.execPath, [script, ...typed], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const reported = new Set();
  child.on('message', (result) => {
    reported.add(result.name);
    report(result);
  });
  return new Promise((resolve) => {
    const end = (message) => {
      for (const name of typed.filter((n) => !reported.has(n))) {
        report({
          name,
          ok: false,
          output: `${output}${message}`,
          seconds: (Date.now() - started) / 1000,
        });
      }
      resolve();
    };
    child.once('error', (error) => end(`${error.message}\n`));
    child.once('close', (code, signal) => end(`typed-checks exited with ${code ?? signal}\n`));
  });
}

const failed = [];
const report = (result) => {
  if (result.output.trim() !== '') process.stdout.write(result.output);
  console.log(`${result.ok ? 'ok' : 'FAILED'}: ${result.name} (${result.seconds.toFixed(0)} s)`);
  if (!result.ok) failed.push(result.name);
};
const typed = names.filter((n) => TYPED.includes(n));
await Promise.all([
  typed.length > 0 ? typedChecks(typed, report) : undefined,
  ...names.filter((n) => !TYPED.includes(n)).map(async (name) => report(await check(name))),
]);
if (failed.length > 0) {
  console.error(`static checks failed: ${failed.join(', ')}`);
  process.exit(1);
}
