/**
 * A child's output is whole when its exit is reported (test/helpers/command.ts `closed`,
 * `outputOf`). Node's 'exit' can come before the last of stdout and stderr is read: when a
 * worker's event loop was busy while several children ran, node reaps every exited child at the
 * first SIGCHLD, ahead of reading their pipes, and a test then saw an empty stderr beside the right
 * exit code (a CI run on Node 24: four concurrent `runCli` tests at once). Here the output comes
 * after the exit for certain: a grandchild holding the pipes writes once its parent is reaped.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { outputOf } from './helpers/command.js';

/** Writes once process PARENT is gone (reaped), checking every 5 ms, at most 2,000 times. */
const GRANDCHILD = `
const gone = () => { try { process.kill(Number(process.env.PARENT), 0); return false; } catch { return true; } };
let tries = 0;
const timer = setInterval(() => {
  if (!gone() && ++tries < 2000) return;
  clearInterval(timer);
  console.log('out');
  console.error('the problem');
}, 5);`;

/** Leaves the grandchild its stdout and stderr, and exits 78 at once. */
const CHILD = `
const { spawn } = require('node:child_process');
spawn(process.execPath, ['-e', process.env.GRANDCHILD], {
  stdio: ['ignore', 'inherit', 'inherit'],
  env: { PARENT: String(process.pid), GRANDCHILD: '' },
}).unref();
process.exitCode = 78;`;

describe('a child process output', () => {
  it('is read to its end before the exit is reported, though it comes after the exit', async () => {
    const child = spawn(process.execPath, ['-e', CHILD], {
      env: { PATH: process.env.PATH ?? '', GRANDCHILD },
    });
    expect(await outputOf(child)).toEqual({ code: 78, stdout: 'out\n', stderr: 'the problem\n' });
  });
});
