/** `oauth-sidecar` (serve): the sidecar on the configuration, JSON logs on stdout. */
import type { Config } from '../config/types.js';
import { ListenError } from '../errors.js';
import { startSidecar, type RunningSidecar } from '../sidecar.js';
import { createLogDestination, createLogger, type Logger } from '../telemetry/logger.js';

/** Where the JSON log lines go: stdout unless a test captures them. */
export type LogSink = { write(line: string): unknown; flushSync?(): void };
import type { Io } from './check.js';

/** What main.ts needs of a command that keeps running: its logger and how to stop it. */
export interface Serving {
  logger: Logger;
  sidecar: RunningSidecar;
  /** Runs after the sidecar shut down (the demo stops its stand-in). */
  cleanup?: () => Promise<void>;
}

/** Start serving; an exit code when the sidecar cannot start. */
export async function runServe(
  config: Config,
  io: Io,
  destination: LogSink = createLogDestination(),
): Promise<Serving | number> {
  const logger = createLogger({ level: config.log.level, destination });
  try {
    return { logger, sidecar: await startSidecar(config, { logger, logSink: destination }) };
  } catch (error) {
    if (error instanceof ListenError) {
      // The operator's to fix, not a bug: one line with the address and the setting, no stack.
      const { setting, address } = error;
      logger.fatal(
        { event: 'listen', setting: setting.env, address },
        `cannot start: ${error.message}`,
      );
      return 1;
    }
    logger.fatal({ err: error }, 'cannot start');
    io.err(
      `oauth-sidecar: cannot start: ${error instanceof Error ? error.message : String(error)}`,
    );
    return 1;
  }
}
