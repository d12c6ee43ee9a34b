/**
 * Tracing with OpenTelemetry's lean packages (docs/reference.md "Traces"): the trace SDK's
 * samplers, ids from a pool of random bytes (span-ids.ts), spans recorded as the SDK's
 * `ReadableSpan` (recorded-span.ts), a batch span processor and the OTLP/HTTP exporter (protobuf
 * or JSON). Loaded only when tracing is on (tracing.ts). Contexts are passed explicitly: no
 * context manager, no instrumentation.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  TraceFlags,
  defaultTextMapGetter,
  trace,
  type Attributes,
  type Context,
  type Link,
  type SpanContext,
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
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import type { IncomingHttpHeaders } from 'node:http';
import type { TracingConfig } from '../config/types.js';
import { MAX_POOLED_BUFFERS, SpanBatch, SpanBuffers } from './otlp-protobuf.js';
import { ERROR, RecordedSpan, type SpanSink } from './recorded-span.js';
import { PooledIds } from './span-ids.js';
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
const ids = new PooledIds();
const NO_LINKS: Link[] = [];
const NO_ATTRIBUTES: Attributes = {};
Object.freeze(NO_LINKS);
Object.freeze(NO_ATTRIBUTES);

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
  const buffers = new SpanBuffers(MAX_POOLED_BUFFERS);
  return new BatchProcessor(protobuf, () => new SpanBatch(buffers), config, deps.dropped);
}

function traceparentOf(c: SpanContext): string {
  return `00-${c.traceId}-${c.spanId}-${c.traceFlags & TraceFlags.SAMPLED ? '01' : '00'}`;
}

/** End `span` with the answer's status and, for a failure, its `error.type` (status ERROR). */
function finish(
  span: RecordedSpan,
  status: number | undefined,
  errorType: string | undefined,
): void {
  if (status !== undefined) span.attributes['http.response.status_code'] = status;
  if (errorType !== undefined) {
    span.attributes['error.type'] = errorType;
    span.status = ERROR;
  }
  span.end();
}

/** A child of `parent`: the same trace and decision, a new span id. */
function childOf(parent: SpanContext): SpanContext {
  return {
    traceId: parent.traceId,
    spanId: ids.generateSpanId(),
    traceFlags: parent.traceFlags,
    traceState: parent.traceState,
  };
}

class Attempt implements AttemptSpan {
  readonly traceparent: string;

  constructor(
    context: SpanContext,
    private readonly span: RecordedSpan | undefined,
  ) {
    this.traceparent = traceparentOf(context);
  }

  end(status: number | undefined, errorType?: string): void {
    const span = this.span;
    if (span === undefined || span.ended) return;
    const failed = status !== undefined && status >= 500 ? String(status) : undefined;
    finish(span, status, errorType ?? failed);
  }
}

class Request implements RequestSpan {
  readonly sampledTraceId: string | undefined;

  /** `span`: undefined when the sampler did not record this request. */
  constructor(
    private readonly context: SpanContext,
    private readonly span: RecordedSpan | undefined,
    private readonly sink: SpanSink,
    private readonly upstream: { address: string; port: number },
  ) {
    this.sampledTraceId = context.traceFlags & TraceFlags.SAMPLED ? context.traceId : undefined;
  }

  wait(name: WaitName, startMs: number, endMs: number, attributes?: Record<string, string>): void {
    if (this.span === undefined || this.span.ended) return;
    const context = childOf(this.context);
    new RecordedSpan(
      this.sink,
      name,
      SpanKind.INTERNAL,
      context,
      this.context,
      attributes ?? {},
      startMs,
    ).end(endMs);
  }

  attempt(method: string, resend: boolean): AttemptSpan {
    const context = childOf(this.context);
    if (this.span === undefined) return new Attempt(context, undefined);
    const attributes: Attributes = {
      'server.address': this.upstream.address,
      'server.port': this.upstream.port,
      'http.request.method': method,
    };
    if (resend) attributes['http.request.resend_count'] = 1;
    const span = new RecordedSpan(
      this.sink,
      method,
      SpanKind.CLIENT,
      context,
      this.context,
      attributes,
    );
    return new Attempt(context, span);
  }

  end(status: number, code?: string): void {
    const span = this.span;
    if (span === undefined || span.ended) return;
    if (code !== undefined) span.attributes['oauth_sidecar.error_code'] = code;
    finish(span, status, status >= 500 ? (code ?? String(status)) : undefined);
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

/**
 * A new root or server span's context: the caller's trace if it sent a valid `traceparent`, else a
 * new one; recorded if the sampler says so (the six samplers add no attributes). Children inherit
 * the decision (`childOf`), which is what each of the six `OTEL_TRACES_SAMPLER` choices decides for
 * a child of a local span.
 */
function decide(
  sampler: Sampler,
  parentContext: Context,
  name: string,
  kind: SpanKind,
  attributes: Attributes,
): {
  context: SpanContext;
  parent: SpanContext | undefined;
  recorded: boolean;
} {
  const remote = trace.getSpanContext(parentContext);
  const parent = remote !== undefined && trace.isSpanContextValid(remote) ? remote : undefined;
  const traceId = parent?.traceId ?? ids.generateTraceId();
  const result = sampler.shouldSample(parentContext, traceId, name, kind, attributes, NO_LINKS);
  const context: SpanContext = {
    traceId,
    spanId: ids.generateSpanId(),
    traceFlags:
      result.decision === SamplingDecision.RECORD_AND_SAMPLED
        ? TraceFlags.SAMPLED
        : TraceFlags.NONE,
    traceState: result.traceState ?? parent?.traceState,
  };
  return { context, parent, recorded: result.decision !== SamplingDecision.NOT_RECORD };
}

/** Export what is queued and stop, or give up after `timeoutMs`. */
async function shutdownWithin(processor: SpanProcessor, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, timeoutMs);
    timer.unref();
  });
  try {
    await Promise.race([processor.shutdown(), late]);
  } finally {
    clearTimeout(timer);
  }
}

export function createTracing(config: TracingConfig, deps: TracingDeps): Tracing {
  const processor = processorFor(config, deps);
  const chosen = sampler(config);
  const sink: SpanSink = {
    resource: resourceFromAttributes({
      ...config.resourceAttributes,
      'service.name': config.serviceName,
      'service.version': deps.version,
    }),
    instrumentationScope: { name: 'oauth-sidecar', version: deps.version },
    onEnd: (span) => processor.onEnd(span),
  };
  const tokenHost = new URL(deps.tokenUrl).hostname;
  const upstreamUrl = new URL(deps.upstream);
  const upstream = {
    address: upstreamUrl.hostname,
    port: Number(upstreamUrl.port || (upstreamUrl.protocol === 'https:' ? 443 : 80)),
  };

  return {
    request(headers, method, target) {
      const parentContext = propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
      const query = target.indexOf('?');
      const path = query < 0 ? target : target.slice(0, query);
      const route = routeOf(path, deps.pathPrefixes);
      const name = route === undefined ? method : `${method} ${route}`;
      // As the SDK does for attributes set after the start: the sampler sees none.
      const { context, parent, recorded } = decide(
        chosen,
        parentContext,
        name,
        SpanKind.SERVER,
        NO_ATTRIBUTES,
      );
      if (!recorded) return new Request(context, undefined, sink, upstream);
      const attributes = serverAttributes(
        method,
        path,
        route,
        target,
        query,
        headers,
        config.recordQuery,
      );
      const span = new RecordedSpan(sink, name, SpanKind.SERVER, context, parent, attributes);
      return new Request(context, span, sink, upstream);
    },
    grant(grant): GrantSpan {
      const attributes: Attributes = {
        'oauth.grant_type': grant,
        'server.address': tokenHost,
        'http.request.method': 'POST',
      };
      const name = 'oauth.token';
      const { context, recorded } = decide(chosen, ROOT_CONTEXT, name, SpanKind.CLIENT, attributes);
      const span = recorded
        ? new RecordedSpan(sink, name, SpanKind.CLIENT, context, undefined, attributes)
        : undefined;
      return {
        end(outcome) {
          if (span === undefined || span.ended) return;
          span.attributes['oauth.outcome'] = outcome;
          if (outcome !== 'success') span.status = ERROR;
          span.end();
        },
      };
    },
    shutdown: (timeoutMs) => shutdownWithin(processor, timeoutMs),
  };
}
