// Runs the vitest suite N times as it is, then M times with a busy loop pinned beside it, and
// reports every test that failed at least once (a flaky test is one that fails on a loaded
// machine): docs/testing.md "Repeated runs".
//
//   npm run build && node scripts/repeat-tests.mjs [--runs 5] [--busy-runs 3] [--cpu 0] [files…]
//
// The busy loop is a node process spinning on CPU `--cpu` (taskset), as another job on a shared
// 2-core machine would. Files given after the options narrow each run to them. Exit 0 when every
// run was green, 1 otherwise.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    runs: { type: 'string', default: '5' },
    'busy-runs': { type: 'string', default: '3' },
    cpu: { type: 'string', default: '0' },
  },
});
const runs = Number(values.runs);
const busyRuns = Number(values['busy-runs']);
const root = join(import.meta.dirname, '..');
const work = mkdtempSync(join(tmpdir(), 'oauth-sidecar-repeat-'));

function hasTaskset() {
  try {
    execFileSync('sh', ['-c', 'command -v taskset'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** A node process spinning on one CPU until stopped. */
function startBusyLoop() {
  const spin = [process.execPath, '-e', 'for (;;) {}'];
  const [command, ...args] = hasTaskset() ? ['taskset', '-c', values.cpu, ...spin] : spin;
  const child = spawn(command, args, { stdio: 'ignore' });
  return () => child.kill('SIGKILL');
}

/** One vitest run; the failed tests' full names, or undefined when it left no report. */
function vitest(label) {
  const report = join(work, `${label}.json`);
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        join(root, 'node_modules', 'vitest', 'vitest.mjs'),
        'run',
        '--reporter=dot',
        '--reporter=json',
        `--outputFile.json=${report}`,
        ...positionals,
      ],
      { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] },
    );
    child.once('exit', () => {
      try {
        const results = JSON.parse(readFileSync(report, 'utf8'));
        const failed = results.testResults.flatMap((file) =>
          file.assertionResults
            .filter((t) => t.status === 'failed')
            .map((t) => `${file.name.slice(root.length + 1)} > ${t.fullName}`),
        );
        // A file that failed to load has no assertion results: name the file.
        failed.push(...filesThatFailed(results));
        resolve({ failed, passed: results.numPassedTests });
      } catch {
        resolve(undefined);
      }
    });
  });
}

/** Files that failed without a failed test (an error while loading, a hook). */
function filesThatFailed(results) {
  return results.testResults
    .filter((f) => f.status === 'failed' && f.assertionResults.every((t) => t.status !== 'failed'))
    .map((f) => `${f.name.slice(root.length + 1)} (the file failed: ${f.message.split('\n')[0]})`);
}

const failures = new Map();
const lines = [];
let green = 0;
const plan = [
  ...Array.from({ length: runs }, (_, i) => ({ label: `run-${i + 1}`, busy: false })),
  ...Array.from({ length: busyRuns }, (_, i) => ({ label: `busy-${i + 1}`, busy: true })),
];
try {
  for (const { label, busy } of plan) {
    const stop = busy ? startBusyLoop() : () => undefined;
    const started = Date.now();
    const result = await vitest(label).finally(stop);
    const seconds = Math.round((Date.now() - started) / 1000);
    if (result === undefined) {
      lines.push(`${label}${busy ? ' (busy loop)' : ''}: no report (vitest crashed), ${seconds} s`);
      failures.set(`${label}: vitest left no report`, [label]);
      continue;
    }
    for (const name of result.failed) failures.set(name, [...(failures.get(name) ?? []), label]);
    if (result.failed.length === 0) green += 1;
    lines.push(
      `${label}${busy ? ' (busy loop)' : ''}: ${result.passed} passed, ${result.failed.length} failed, ${seconds} s`,
    );
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.stdout.write(`\n${lines.join('\n')}\n${green} of ${plan.length} runs green\n`);
if (failures.size > 0) {
  process.stdout.write('failed at least once:\n');
  for (const [name, where] of failures) process.stdout.write(`  ${name} (${where.join(', ')})\n`);
}
process.exit(failures.size === 0 ? 0 : 1);
