#!/usr/bin/env node
/** The entry point: argv and env choose a command; the only reader of process.env and signals. */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { USAGE, UsageError, parseArgs } from './cli.js';
import { check, checkOffline, type Io } from './commands/check.js';
import { runDemo } from './commands/demo.js';
import { runServe, type Serving } from './commands/serve.js';
import { printStandinToken, runStandin } from './commands/standin.js';
import { formatConfigProblems, loadConfig } from './config/load.js';
import { ConfigError, EXIT_CONFIG } from './errors.js';
import { VERSION } from './version.js';

type Env = Record<string, string | undefined>;

/** Run the CLI. Returns an exit code for one-shot commands; serve and demo keep running. */
export async function run(argv: readonly string[], env: Env, io: Io): Promise<number | undefined> {
  let args;
  try {
    args = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err(`oauth-sidecar: ${error.message}\n${USAGE}`);
    return 64;
  }
  if (args.command === 'help' || args.command === 'version') {
    io.out(args.command === 'help' ? USAGE : VERSION);
    return 0;
  }
  if (args.command === 'demo') return keepServing(await runDemo(env, io));
  if (args.command === 'standin') return keepStandin(await runStandin(env, io));
  if (args.command === 'standin-token') return printStandinToken(args.token!, io);
  const notChecked: string[] = [];
  const note = (line: string): number => notChecked.push(line);
  const strictness = args.offline ? ({ kind: 'offline-check', note } as const) : undefined;
  let config;
  try {
    config = await loadConfig({ env, configFile: args.configFile, strictness });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    io.err(formatConfigProblems(error));
    return EXIT_CONFIG;
  }
  if (args.command === 'check' && args.offline) return checkOffline(config, notChecked, io);
  if (args.command === 'check') return check(config, io);
  return keepServing(await runServe(config, io));
}

/**
 * A started command serves until SIGTERM/SIGINT: the first drains and exits 0, a second exits at
 * once. The last request lines reach stdout even on an exit without shutdown.
 */
function keepServing(started: Serving | number): number | undefined {
  if (typeof started === 'number') return started;
  const { logger, sidecar, cleanup } = started;
  process.once('exit', () => sidecar.flush());
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled) {
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    signalled = true;
    logger.info({ signal }, 'signal received');
    sidecar
      .shutdown()
      .then(() => cleanup?.())
      .then(
        () => {
          logger.flush();
          process.exit(0);
        },
        (error: unknown) => {
          logger.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return undefined;
}

/** The stand-in runs until SIGTERM/SIGINT. */
function keepStandin(started: { close(): Promise<void> } | number): number | undefined {
  if (typeof started === 'number') return started;
  const stop = (): void => void started.close().finally(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return undefined;
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === fileURLToPath(import.meta.url);
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  const io: Io = {
    out: (line) => console.log(line),
    err: (line) => console.error(line),
  };
  run(process.argv.slice(2), process.env, io).then(
    (code) => {
      if (code !== undefined) process.exitCode = code;
    },
    (error: unknown) => {
      console.error(
        `oauth-sidecar: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      );
      process.exitCode = 1;
    },
  );
}
