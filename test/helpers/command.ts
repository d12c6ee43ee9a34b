import { spawn, type ChildProcess } from 'node:child_process';

/** How a child ended: node's 'close' gives one of the two. */
export interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * Resolves once `child` has exited and its stdout and stderr are read to their end (node's
 * 'close'). 'exit' can come first: when this worker's event loop was busy while the child ran,
 * the child's last output may still sit unread in the pipes (test/child-output.test.ts).
 */
export function closed(child: ChildProcess): Promise<Ended> {
  return new Promise((resolve) =>
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) =>
      resolve({ code, signal }),
    ),
  );
}

/** The exit code, or the name of the signal that ended the child (as an expectation prints it). */
export function exitOf({ code, signal }: Ended): number | string {
  return code ?? signal ?? 'neither code nor signal';
}

/** A child's whole output and exit code, once both are known (`closed`). */
export async function outputOf(
  child: ChildProcess,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const { code } = await closed(child);
  return { code, stdout, stderr };
}

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
  const exited = closed(child).then(exitOf);
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
