import { systemClock, type Clock, type TimerHandle } from '../clock.js';
import { pathForLog } from '../proxy/path-safety.js';

/** Where log lines go: pino's destination (stdout) in production, a capturing stream in tests. */
export interface LineSink {
  /** One or more whole lines, each ending in `\n`. */
  write(lines: string): unknown;
}

/** What one proxied request's log line says (docs/reference.md "Logs"). */
export interface RequestLogFields {
  requestId: string;
  method: string;
  /** The raw request target; logged without its query string. */
  target: string;
  status: number;
  durationMs: number;
  upstreamStatus?: number | undefined;
  replayed: boolean;
  /** `client_closed` / `upstream_failed` when the answer was cut short. */
  result?: string | undefined;
  /** The envelope code when the sidecar answered itself. */
  code?: string | undefined;
  /** With `callers.auth: jwt`: the verified caller's rule's name (never the token or its subject). */
  caller?: string | undefined;
  /** The caller check that refused the request (`expired`, `signature`, `forbidden`, ...). */
  callerCheck?: string | undefined;
}

export interface RequestLog {
  write(fields: RequestLogFields): void;
  /** Write the lines still held (shutdown: before the process exits). */
  flush(): void;
}

const INFO_ENABLED = new Set(['trace', 'debug', 'info']);

/** Lines held before they go out in one write: a bound on the buffer. */
export const REQUEST_LOG_BATCH_BYTES = 16 * 1024;
/** The longest a line waits for the batch to fill. */
export const REQUEST_LOG_FLUSH_MS = 50;

/**
 * One line per proxied request, written without pino's generic redaction: every field is fixed
 * and safe by construction (no header, no query string, no token), so nothing needs censoring,
 * and the line costs one string build: an exception to "pino for logs", with its figure, in
 * docs/design.md "Exceptions". Byte for byte the line pino would write (the test says so).
 *
 * Lines go to the sink in batches: at REQUEST_LOG_BATCH_BYTES, or REQUEST_LOG_FLUSH_MS after the
 * first line of a batch, whichever comes first, and on `flush()` (shutdown, exit). Under load
 * that is one write for ~50 requests instead of one each (docs/benchmarks.md "Hot path").
 * Undefined when `level` is above `info`.
 */
export function createRequestLog(options: {
  level: string;
  sink: LineSink;
  now?: () => number;
  /** The flush timer's clock (the real one unless a test gives its own). */
  clock?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  batchBytes?: number;
  flushMs?: number;
}): RequestLog | undefined {
  if (!INFO_ENABLED.has(options.level)) return undefined;
  const { sink } = options;
  const now = options.now ?? Date.now;
  const clock = options.clock ?? systemClock;
  const batchBytes = options.batchBytes ?? REQUEST_LOG_BATCH_BYTES;
  const flushMs = options.flushMs ?? REQUEST_LOG_FLUSH_MS;
  let pending = '';
  let timer: TimerHandle | undefined;
  const flush = (): void => {
    if (timer !== undefined) {
      clock.clearTimeout(timer);
      timer = undefined;
    }
    if (pending.length === 0) return;
    const lines = pending;
    pending = '';
    sink.write(lines);
  };
  return {
    write(fields) {
      pending += requestLogLine(fields, now());
      if (pending.length >= batchBytes) flush();
      else if (timer === undefined) {
        timer = clock.setTimeout(flush, flushMs);
        // A pending batch never keeps the process alive; shutdown and exit flush it.
        timer.unref?.();
      }
    },
    flush,
  };
}

/**
 * The one builder of the request line: a pino-compatible JSON line (level, time, fields, msg), the
 * time written as pino's `stdTimeFunctions.isoTime` writes it.
 */
export function requestLogLine(fields: RequestLogFields, time: number): string {
  let line = `{"level":"info","time":"${new Date(time).toISOString()}","component":"proxy","requestId":${JSON.stringify(fields.requestId)},"method":${JSON.stringify(fields.method)},"path":${JSON.stringify(pathForLog(fields.target))},"status":${fields.status},"durationMs":${fields.durationMs}`;
  if (fields.upstreamStatus !== undefined) line += `,"upstreamStatus":${fields.upstreamStatus}`;
  line += `,"replayed":${fields.replayed}`;
  if (fields.result !== undefined) line += `,"result":${JSON.stringify(fields.result)}`;
  if (fields.code !== undefined) line += `,"code":${JSON.stringify(fields.code)}`;
  if (fields.caller !== undefined) line += `,"caller":${JSON.stringify(fields.caller)}`;
  if (fields.callerCheck !== undefined) {
    line += `,"callerCheck":${JSON.stringify(fields.callerCheck)}`;
  }
  return `${line},"msg":"request"}\n`;
}
