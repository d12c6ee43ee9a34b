/**
 * Tracing with OpenTelemetry's lean packages (docs/reference.md "Traces"): the trace SDK, a batch
 * span processor and the OTLP/HTTP exporter (protobuf or JSON). Loaded only when tracing is on
 * (tracing.ts). Contexts are passed explicitly: no context manager, no instrumentation.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  defaultTextMapGetter,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import {
  ExportResultCode,
  W3CTraceContextPropagator,
  type ExportResult,
} from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import type { IncomingHttpHeaders } from 'node:http';
import type { TracingConfig } from '../config/types.js';
import { SpanBatch } from './otlp-protobuf.js';
import {
  BatchProcessor,
  SpanList,
  jsonExporter,
  protobufExporter,
  type Exporter,
} from './span-batches.js';
import type {
  AttemptSpan,
  GrantSpan,
  RequestSpan,
  Tracing,
  TracingDeps,
  WaitName,
} from './tracing.js';

/** An exporter that keeps failing is logged at most this often. */
export const EXPORT_FAILURE_LOG_MS = 60_000;

const propagator = new W3CTraceContextPropagator();

function sampler(config: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerArg);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * The exporter, wrapped: a failed export is logged once per minute (with how many failed since),
 * never per batch, and never with the headers (they may hold an API key).
 */
class LoggedExporter<T> {
  #failures = 0;
  #lastLog = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly inner: Exporter<T>,
    private readonly logger: TracingDeps['logger'],
  ) {}

  export(items: T, done: (result: ExportResult) => void): void {
    this.inner.export(items, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) this.#failed(result.error);
      done(result);
    });
  }

  #failed(error: Error | undefined): void {
    this.#failures += 1;
    const now = Date.now();
    if (now - this.#lastLog < EXPORT_FAILURE_LOG_MS) return;
    this.#lastLog = now;
    this.logger.warn(
      { failures: this.#failures, reason: error?.message ?? 'unknown' },
      'span export failed; spans are dropped until the collector answers (logged once a minute)',
    );
    this.#failures = 0;
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/** Protobuf (the default): spans encoded as they end. JSON: the spans, for OpenTelemetry's serializer. */
function processorFor(config: TracingConfig, deps: TracingDeps): SpanProcessor {
  if (config.protocol === 'http/json') {
    const json = new LoggedExporter(jsonExporter(config), deps.logger);
    return new BatchProcessor(json, () => new SpanList(), config, deps.dropped);
  }
  const protobuf = new LoggedExporter(protobufExporter(config), deps.logger);
  return new BatchProcessor(protobuf, () => new SpanBatch(), config, deps.dropped);
}

function traceparentOf(span: Span): string {
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-${c.traceFlags & TraceFlags.SAMPLED ? '01' : '00'}`;
}

/** End `span` with the answer's status and, for a failure, its `error.type` (status ERROR). */
function finish(span: Span, status: number | undefined, errorType: string | undefined): void {
  if (status !== undefined) span.setAttribute('http.response.status_code', status);
  if (errorType !== undefined) {
    span.setAttribute('error.type', errorType);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

class Attempt implements AttemptSpan {
  readonly traceparent: string;
  #ended = false;

  constructor(private readonly span: Span) {
    this.traceparent = traceparentOf(span);
  }

  end(status: number | undefined, errorType?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    const failed = status !== undefined && status >= 500 ? String(status) : undefined;
    finish(this.span, status, errorType ?? failed);
  }
}

class Request implements RequestSpan {
  readonly sampledTraceId: string | undefined;
  readonly #context: Context;
  #ended = false;

  constructor(
    private readonly span: Span,
    private readonly tracer: Tracer,
    private readonly upstream: Attributes,
  ) {
    this.#context = trace.setSpan(ROOT_CONTEXT, span);
    const c = span.spanContext();
    this.sampledTraceId = c.traceFlags & TraceFlags.SAMPLED ? c.traceId : undefined;
  }

  wait(name: WaitName, startMs: number, endMs: number, attributes?: Record<string, string>): void {
    if (!this.span.isRecording()) return;
    const span = this.tracer.startSpan(
      name,
      { kind: SpanKind.INTERNAL, startTime: startMs },
      this.#context,
    );
    if (attributes !== undefined) span.setAttributes(attributes);
    span.end(endMs);
  }

  attempt(method: string, resend: boolean): AttemptSpan {
    const span = this.tracer.startSpan(method, { kind: SpanKind.CLIENT }, this.#context);
    // Set on the span, not passed to startSpan: the SDK checks attributes passed to it twice.
    if (span.isRecording()) {
      span.setAttributes(this.upstream);
      span.setAttribute('http.request.method', method);
      if (resend) span.setAttribute('http.request.resend_count', 1);
    }
    return new Attempt(span);
  }

  end(status: number, code?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    if (code !== undefined) this.span.setAttribute('oauth_sidecar.error_code', code);
    finish(this.span, status, status >= 500 ? (code ?? String(status)) : undefined);
  }
}

/** The route of a target: the forwarded prefix it falls under (no ids, no query). */
function routeOf(path: string, prefixes: readonly string[]): string | undefined {
  return prefixes.find((prefix) => path.startsWith(prefix));
}

function serverAttributes(
  method: string,
  path: string,
  route: string | undefined,
  target: string,
  query: number,
  headers: IncomingHttpHeaders,
  recordQuery: boolean,
): Attributes {
  const attributes: Attributes = { 'http.request.method': method, 'url.path': path };
  if (route !== undefined) attributes['http.route'] = route;
  if (recordQuery && query >= 0) attributes['url.query'] = target.slice(query + 1);
  const requestId = headers['x-request-id'];
  if (typeof requestId === 'string') attributes['http.request.header.x-request-id'] = [requestId];
  return attributes;
}

export function createTracing(config: TracingConfig, deps: TracingDeps): Tracing {
  const processor = processorFor(config, deps);
  const provider = new TracerProvider({
    sampler: sampler(config),
    resource: resourceFromAttributes({
      ...config.resourceAttributes,
      'service.name': config.serviceName,
      'service.version': deps.version,
    }),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('oauth-sidecar', deps.version);
  const tokenHost = new URL(deps.tokenUrl).hostname;
  const upstreamUrl = new URL(deps.upstream);
  const upstream: Attributes = {
    'server.address': upstreamUrl.hostname,
    'server.port': Number(upstreamUrl.port || (upstreamUrl.protocol === 'https:' ? 443 : 80)),
  };

  return {
    request(headers, method, target) {
      const parent = propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
      const query = target.indexOf('?');
      const path = query < 0 ? target : target.slice(0, query);
      const route = routeOf(path, deps.pathPrefixes);
      const name = route === undefined ? method : `${method} ${route}`;
      const span = tracer.startSpan(name, { kind: SpanKind.SERVER }, parent);
      // The samplers decide on the parent and the trace id alone: an unsampled request builds none.
      if (span.isRecording()) {
        span.setAttributes(
          serverAttributes(method, path, route, target, query, headers, config.recordQuery),
        );
      }
      return new Request(span, tracer, upstream);
    },
    grant(grant): GrantSpan {
      const span = tracer.startSpan('oauth.token', {
        kind: SpanKind.CLIENT,
        attributes: {
          'oauth.grant_type': grant,
          'server.address': tokenHost,
          'http.request.method': 'POST',
        },
      });
      return {
        end(outcome) {
          span.setAttribute('oauth.outcome', outcome);
          if (outcome !== 'success') span.setStatus({ code: SpanStatusCode.ERROR });
          span.end();
        },
      };
    },
    async shutdown(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
        timer.unref();
      });
      try {
        await Promise.race([provider.shutdown(), late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
