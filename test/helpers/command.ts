import { spawn } from 'node:child_process';

/** A started command whose output is collected; `stop` sends SIGTERM and waits for its exit. */
export interface Command {
  stdout(): string;
  stderr(): string;
  readonly exited: Promise<number | string>;
  stop(): Promise<number | string>;
}

export function startCommand(
  file: string,
  args: readonly string[],
  options: { cwd: string; env: Record<string, string> },
): Command {
  const child = spawn(file, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  return {
    stdout: () => out,
    stderr: () => err,
    exited,
    stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** The variables of the stand-in's `export A=B C=D` line. */
export function exportedVariables(output: string): Record<string, string> {
  const line = output.split('\n').find((text) => text.startsWith('export '));
  if (line === undefined) throw new Error(`no export line in: ${output}`);
  return Object.fromEntries(
    line
      .slice('export '.length)
      .trim()
      .split(/\s+/)
      .map((pair) => {
        const at = pair.indexOf('=');
        return [pair.slice(0, at), pair.slice(at + 1).replace(/^'|'$/g, '')];
      }),
  );
}
