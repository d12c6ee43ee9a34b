/**
 * What the request path and the token keeper see of tracing (docs/reference.md "Traces"): types
 * only. The OpenTelemetry part (otel.ts) is a chunk of its own that start-tracing.ts imports only
 * when tracing is on. Off, every caller holds `undefined` and pays one comparison.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from './logger.js';

/** Waits that happened, each a child span of the request's (only when it waited). */
export type WaitName = 'token.wait' | 'quota.wait' | 'cache.lookup';

/** One upstream attempt: its context goes upstream as `traceparent`. */
export interface AttemptSpan {
  readonly traceparent: string;
  /** The upstream's status, or the failure's kind (`error.type`). Ends once. */
  end(status: number | undefined, errorType?: string): void;
}

/** The server span of one proxied request. */
export interface RequestSpan {
  /** A wait from `startMs` to `endMs` (epoch ms), with an attribute or two. */
  wait(name: WaitName, startMs: number, endMs: number, attributes?: Record<string, string>): void;
  /** A child client span for one upstream attempt (`resend`: a replay after a 401). */
  attempt(method: string, resend: boolean): AttemptSpan;
  /**
   * The status the client got, the envelope code when the sidecar answered itself, and the
   * verified caller's rule's name (`callers.auth: jwt`).
   */
  end(status: number, code?: string, caller?: string): void;
  /** The trace id while the span is sampled (the duration histogram's exemplar). */
  readonly sampledTraceId: string | undefined;
}

/** A token grant's span. */
export interface GrantSpan {
  end(outcome: 'success' | 'rejected' | 'error'): void;
}

export interface Tracing {
  /** A server span continuing the caller's `traceparent` (or a new trace). */
  request(headers: IncomingHttpHeaders, method: string, target: string): RequestSpan;
  grant(grant: string): GrantSpan;
  /** Export what is queued, within `timeoutMs`; then stop. */
  shutdown(timeoutMs: number): Promise<void>;
}

/**
 * Why spans were dropped: the export queue was full, the collector refused them (an error status),
 * or the export got no answer.
 */
export type DropReason = 'queue_full' | 'refused' | 'export_failed';

/** The drop metric (`oauth_sidecar_tracing_spans_dropped_total`). */
export interface DroppedSpans {
  inc(labels: { reason: DropReason }, count: number): void;
}

export interface TracingDeps {
  logger: Logger;
  dropped: DroppedSpans;
  /** Forwarded path prefixes: a span's route is the one a request matched. */
  pathPrefixes: readonly string[];
  /** The upstream's origin, for the client spans' `server.address`/`server.port`. */
  upstream: string;
  /** The token endpoint, for the grant spans' `server.address`. */
  tokenUrl: string;
  /** `service.version`. */
  version: string;
}
