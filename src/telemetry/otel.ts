/**
 * Tracing on OpenTelemetry's trace SDK (docs/reference.md "Traces"): its `TracerProvider` with the
 * configured sampler and resource, its `BatchSpanProcessor` and its OTLP/HTTP exporters (protobuf
 * or JSON). Loaded only when tracing is on (tracing.ts). Contexts are passed explicitly: no context
 * manager, no instrumentation.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  createNoopMeter,
  defaultTextMapGetter,
  trace,
  type Attributes,
  type Context,
  type Meter,
  type MeterProvider,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import type { IncomingHttpHeaders } from 'node:http';
import { systemClock, type Clock, type TimerHandle } from '../clock.js';
import type { TracingConfig } from '../config/types.js';
import { LoggedExporter } from './otel-export.js';
import type {
  AttemptSpan,
  DroppedSpans,
  GrantSpan,
  RequestSpan,
  Tracing,
  TracingDeps,
  WaitName,
} from './tracing.js';

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
 * The batch processor's own count of the spans it drops from a full queue (its self-observability
 * counter, `error.type=queue_full`), read into the drop metric; everything else it reports is
 * discarded.
 */
function queueDrops(dropped: DroppedSpans): MeterProvider {
  const noop = createNoopMeter();
  const meter: Meter = Object.create(noop) as Meter;
  meter.createCounter = () => ({
    add(count, attributes) {
      if (attributes?.['error.type'] === 'queue_full') dropped.inc({ reason: 'queue_full' }, count);
    },
  });
  return { getMeter: () => meter };
}

/** OpenTelemetry's OTLP/HTTP exporter for the configured protocol. */
function exporterFor(config: TracingConfig): SpanExporter {
  const options = {
    url: config.url,
    headers: config.headers,
    timeoutMillis: config.exportTimeoutMs,
  };
  return config.protocol === 'http/json'
    ? new JsonExporter(options)
    : new ProtobufExporter(options);
}

function processorFor(
  config: TracingConfig,
  deps: TracingDeps,
  exporter: SpanExporter,
): BatchSpanProcessor {
  return new BatchSpanProcessor({
    exporter: new LoggedExporter(exporter, deps.logger, deps.dropped),
    maxQueueSize: config.maxQueueSize,
    maxExportBatchSize: config.maxExportBatchSize,
    scheduledDelayMillis: config.scheduleDelayMs,
    exportTimeoutMillis: config.exportTimeoutMs,
    selfObsMeterProvider: queueDrops(deps.dropped),
  });
}

function traceparentOf(c: SpanContext): string {
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

  constructor(private readonly span: Span) {
    this.traceparent = traceparentOf(span.spanContext());
  }

  end(status: number | undefined, errorType?: string): void {
    // Not recording: ended already.
    if (!this.span.isRecording()) return;
    const failed = status !== undefined && status >= 500 ? String(status) : undefined;
    finish(this.span, status, errorType ?? failed);
  }
}

/**
 * The attempt of a request whose span does not record: every configured sampler decides a child
 * as its parent was decided (by the parent's flag or the shared trace id), so no span is started
 * and the request's own unsampled context goes upstream.
 */
class UnrecordedAttempt implements AttemptSpan {
  constructor(readonly traceparent: string) {}

  end(): void {}
}

const SERVER = { kind: SpanKind.SERVER };

/** The server span of a request: its attributes and route-qualified name only when it records. */
class Request implements RequestSpan {
  readonly sampledTraceId: string | undefined;
  /** The span as a parent (recording only), made once. */
  #parent: Context | undefined;

  constructor(
    private readonly span: Span,
    private readonly tracer: Tracer,
    private readonly upstream: { address: string; port: number },
  ) {
    const context = span.spanContext();
    this.sampledTraceId = context.traceFlags & TraceFlags.SAMPLED ? context.traceId : undefined;
  }

  #asParent(): Context {
    this.#parent ??= trace.setSpan(ROOT_CONTEXT, this.span);
    return this.#parent;
  }

  wait(name: WaitName, startMs: number, endMs: number, attributes?: Record<string, string>): void {
    if (!this.span.isRecording()) return;
    this.tracer
      .startSpan(
        name,
        { kind: SpanKind.INTERNAL, attributes, startTime: startMs },
        this.#asParent(),
      )
      .end(endMs);
  }

  attempt(method: string, resend: boolean): AttemptSpan {
    if (!this.span.isRecording())
      return new UnrecordedAttempt(traceparentOf(this.span.spanContext()));
    const attributes: Attributes = {
      'server.address': this.upstream.address,
      'server.port': this.upstream.port,
      'http.request.method': method,
    };
    if (resend) attributes['http.request.resend_count'] = 1;
    return new Attempt(
      this.tracer.startSpan(method, { kind: SpanKind.CLIENT, attributes }, this.#asParent()),
    );
  }

  end(status: number, code?: string, caller?: string): void {
    if (!this.span.isRecording()) return;
    if (code !== undefined) this.span.setAttribute('oauth_sidecar.error_code', code);
    if (caller !== undefined) this.span.setAttribute('oauth_sidecar.caller', caller);
    finish(this.span, status, status >= 500 ? (code ?? String(status)) : undefined);
  }
}

/** The route of a target: the forwarded prefix it falls under (no ids, no query). */
function routeOf(path: string, prefixes: readonly string[]): string | undefined {
  return prefixes.find((prefix) => path.startsWith(prefix));
}

function serverAttributes(
  method: string,
  target: string,
  route: string | undefined,
  headers: IncomingHttpHeaders,
  recordQuery: boolean,
): Attributes {
  const query = target.indexOf('?');
  const path = query < 0 ? target : target.slice(0, query);
  const attributes: Attributes = { 'http.request.method': method, 'url.path': path };
  if (route !== undefined) attributes['http.route'] = route;
  if (recordQuery && query >= 0) attributes['url.query'] = target.slice(query + 1);
  const requestId = headers['x-request-id'];
  if (typeof requestId === 'string') attributes['http.request.header.x-request-id'] = [requestId];
  return attributes;
}

/** A recording server span's route-qualified name and attributes. */
function describeServer(
  span: Span,
  method: string,
  target: string,
  headers: IncomingHttpHeaders,
  prefixes: readonly string[],
  recordQuery: boolean,
): void {
  const query = target.indexOf('?');
  const route = routeOf(query < 0 ? target : target.slice(0, query), prefixes);
  if (route !== undefined) span.updateName(`${method} ${route}`);
  span.setAttributes(serverAttributes(method, target, route, headers, recordQuery));
}

/** Export what is queued and stop, or give up after `timeoutMs`. */
async function shutdownWithin(
  provider: TracerProvider,
  timeoutMs: number,
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout'> = systemClock,
): Promise<void> {
  let timer: TimerHandle | undefined;
  const late = new Promise<void>((resolve) => {
    timer = clock.setTimeout(resolve, timeoutMs);
    timer.unref?.();
  });
  try {
    await Promise.race([provider.shutdown().catch(() => undefined), late]);
  } finally {
    if (timer !== undefined) clock.clearTimeout(timer);
  }
}

function upstreamOf(origin: string): { address: string; port: number } {
  const url = new URL(origin);
  return {
    address: url.hostname,
    port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
  };
}

/** `exporter`: OpenTelemetry's OTLP exporter for `config` unless a test passes its own. */
export function createTracing(
  config: TracingConfig,
  deps: TracingDeps,
  exporter: SpanExporter = exporterFor(config),
): Tracing {
  const provider = new TracerProvider({
    sampler: sampler(config),
    resource: resourceFromAttributes({
      ...config.resourceAttributes,
      'service.name': config.serviceName,
      'service.version': deps.version,
    }),
    spanProcessors: [processorFor(config, deps, exporter)],
  });
  const tracer = provider.getTracer('oauth-sidecar', deps.version);
  const tokenHost = new URL(deps.tokenUrl).hostname;
  const upstream = upstreamOf(deps.upstream);

  return {
    request(headers, method, target) {
      const parent = propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
      // The configured samplers decide on the trace id and the parent alone: the name and the
      // attributes are built only for a span that records.
      const span = tracer.startSpan(method, SERVER, parent);
      if (span.isRecording())
        describeServer(span, method, target, headers, deps.pathPrefixes, config.recordQuery);
      return new Request(span, tracer, upstream);
    },
    grant(grant): GrantSpan {
      const attributes: Attributes = {
        'oauth.grant_type': grant,
        'server.address': tokenHost,
        'http.request.method': 'POST',
      };
      const span = tracer.startSpan('oauth.token', {
        kind: SpanKind.CLIENT,
        attributes,
        root: true,
      });
      return {
        end(outcome) {
          if (!span.isRecording()) return;
          span.setAttribute('oauth.outcome', outcome);
          if (outcome !== 'success') span.setStatus({ code: SpanStatusCode.ERROR });
          span.end();
        },
      };
    },
    shutdown: (timeoutMs) => shutdownWithin(provider, timeoutMs),
  };
}
