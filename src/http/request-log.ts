import { pathForLog } from '../proxy/path-safety.js';

/** Where log lines go: pino's destination (stdout) in production, a capturing stream in tests. */
export interface LineSink {
  write(line: string): unknown;
}

/** What one proxied request's log line says (DESIGN.md "Logs"). */
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
}

export interface RequestLog {
  write(fields: RequestLogFields): void;
}

const INFO_ENABLED = new Set(['trace', 'debug', 'info']);

/**
 * One line per proxied request, written without pino's generic redaction: every field is fixed
 * and safe by construction (no header, no query string, no token), so nothing needs censoring,
 * and the line costs one string build (the profile in docs/benchmarks.md: redaction of this line
 * was the largest single cost per request). Same shape as the other JSON lines. Undefined when
 * `level` is above `info`.
 */
export function createRequestLog(options: {
  level: string;
  sink: LineSink;
  now?: () => number;
}): RequestLog | undefined {
  if (!INFO_ENABLED.has(options.level)) return undefined;
  const { sink } = options;
  const now = options.now ?? Date.now;
  return {
    write(fields) {
      sink.write(requestLogLine(fields, now()));
    },
  };
}

/** The one builder of the request line: a pino-compatible JSON line (level, time, fields, msg). */
export function requestLogLine(fields: RequestLogFields, time: number): string {
  let line = `{"level":"info","time":"${new Date(time).toISOString()}","component":"proxy","requestId":${JSON.stringify(fields.requestId)},"method":${JSON.stringify(fields.method)},"path":${JSON.stringify(pathForLog(fields.target))},"status":${fields.status},"durationMs":${fields.durationMs}`;
  if (fields.upstreamStatus !== undefined) line += `,"upstreamStatus":${fields.upstreamStatus}`;
  line += `,"replayed":${fields.replayed}`;
  if (fields.result !== undefined) line += `,"result":${JSON.stringify(fields.result)}`;
  if (fields.code !== undefined) line += `,"code":${JSON.stringify(fields.code)}`;
  return `${line},"msg":"request"}\n`;
}
