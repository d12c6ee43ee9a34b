import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths pino censors in every log line. Anything that could hold a credential is listed, at the top
 * level and one and two levels down, so a careless `log.info({ headers })` or
 * `log.error({ err })` stays safe. pino reads every path again for each field of a line, so the
 * list holds no path another one covers (`*.*.key` covers `*.headers.key`): docs/benchmarks.md
 * "Footprint".
 */
export const REDACT_PATHS: readonly string[] = (() => {
  const secretKeys = [
    'authorization',
    'Authorization',
    'proxy-authorization',
    'cookie',
    'set-cookie',
    'accessToken',
    'access_token',
    'refreshToken',
    'refresh_token',
    'clientSecret',
    'client_secret',
    'token',
    'password',
    'body',
  ];
  const paths: string[] = [];
  for (const key of secretKeys) {
    paths.push(key, `*.${key}`, `*.*.${key}`);
  }
  return paths;
})();

export interface LoggerOptions {
  level: string;
  /** Where lines go; stdout when absent. Tests pass a stream and grep what it captured. */
  destination?: DestinationStream;
  /** Human-readable lines (demo and local runs); needs the pino-pretty dev dependency. */
  pretty?: boolean;
  /** ANSI colours in the human-readable lines ({@link wantsColour}); off when absent. */
  colour?: boolean;
  /** Extra static fields on every line. */
  base?: Record<string, unknown>;
}

/**
 * stdout, written asynchronously: lines written while a write is in flight go out together in the
 * next one (one syscall for many lines under load, none blocking the event loop). pino flushes it
 * synchronously on exit.
 */
export function createLogDestination(): DestinationStream & { flushSync(): void } {
  return pino.destination({ dest: 1, sync: false });
}

/**
 * Colours for human-readable output: only on a terminal, and never with `NO_COLOR` set to
 * anything but the empty string (no-color.org). A pipe or a file gets plain text.
 */
export function wantsColour(
  stream: { isTTY?: boolean },
  env: Record<string, string | undefined>,
): boolean {
  return stream.isTTY === true && (env.NO_COLOR ?? '') === '';
}

/** The one logger factory: JSON lines with secrets redacted (docs/reference.md "Logs"). */
export function createLogger(options: LoggerOptions): Logger {
  const config = {
    level: options.level,
    base: options.base ?? null,
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  if (options.destination) return pino(config, options.destination);
  if (options.pretty) {
    return pino({
      ...config,
      formatters: undefined,
      transport: {
        target: 'pino-pretty',
        options: {
          colorize: options.colour === true,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname',
        },
      },
    });
  }
  return pino(config);
}
