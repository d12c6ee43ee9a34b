/**
 * A span as the sidecar records it: the fields of the SDK's `ReadableSpan`, which the batch
 * processor, the protobuf encoder and OpenTelemetry's JSON serializer read, and nothing more.
 * Every attribute is set by otel.ts from values it builds itself (strings and numbers), so the
 * SDK's checks of arbitrary values and its limits have nothing to do here. Why not the SDK's own
 * span: docs/benchmarks.md "Spans recorded by the sidecar".
 */
import {
  SpanStatusCode,
  type Attributes,
  type HrTime,
  type Link,
  type SpanContext,
  type SpanKind,
  type SpanStatus,
} from '@opentelemetry/api';
import {
  addHrTimes,
  hrTimeDuration,
  millisToHrTime,
  type InstrumentationScope,
} from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace';

const UNSET: SpanStatus = Object.freeze({ code: SpanStatusCode.UNSET });
export const ERROR: SpanStatus = Object.freeze({ code: SpanStatusCode.ERROR });
const NO_LINKS: Link[] = [];
const NO_EVENTS: TimedEvent[] = [];
Object.freeze(NO_LINKS);
Object.freeze(NO_EVENTS);

/** What every span of one tracer shares: its resource and scope, and where it goes when it ends. */
export interface SpanSink {
  readonly resource: Resource;
  readonly instrumentationScope: InstrumentationScope;
  onEnd(span: ReadableSpan): void;
}

export class RecordedSpan implements ReadableSpan {
  status: SpanStatus = UNSET;
  ended = false;
  /** The end: milliseconds after the start (kept apart from it: an epoch-sized sum loses the
   * nanoseconds, as the SDK's does not). */
  #elapsed = 0;
  /** `performance.now()` at the start: the end is the start plus the monotonic time since. */
  readonly #clockStart: number;

  /** `startMs`: epoch milliseconds (`Date.now()` when the span starts now, as the SDK's). */
  constructor(
    private readonly sink: SpanSink,
    readonly name: string,
    readonly kind: SpanKind,
    private readonly context: SpanContext,
    readonly parentSpanContext: SpanContext | undefined,
    readonly attributes: Attributes,
    readonly startMs: number = Date.now(),
  ) {
    this.#clockStart = performance.now();
  }

  // The same for every span the sidecar records: on the prototype, not in each span.
  get links(): Link[] {
    return NO_LINKS;
  }

  get events(): TimedEvent[] {
    return NO_EVENTS;
  }

  get droppedAttributesCount(): number {
    return 0;
  }

  get droppedEventsCount(): number {
    return 0;
  }

  get droppedLinksCount(): number {
    return 0;
  }

  /** Milliseconds from the start to the end (0 until the span ends). */
  get elapsedMs(): number {
    return this.#elapsed;
  }

  spanContext(): SpanContext {
    return this.context;
  }

  get resource(): Resource {
    return this.sink.resource;
  }

  get instrumentationScope(): InstrumentationScope {
    return this.sink.instrumentationScope;
  }

  get startTime(): HrTime {
    return millisToHrTime(this.startMs);
  }

  get endTime(): HrTime {
    return addHrTimes(millisToHrTime(this.startMs), millisToHrTime(this.#elapsed));
  }

  get duration(): HrTime {
    return hrTimeDuration(this.startTime, this.endTime);
  }

  /**
   * End once (`endMs`: epoch milliseconds; by default now) and hand the span to the processor. An
   * end before the start (the wall clock stepped back) is the start, as in the SDK.
   */
  end(endMs?: number): void {
    if (this.ended) return;
    this.ended = true;
    const elapsed =
      endMs === undefined ? performance.now() - this.#clockStart : endMs - this.startMs;
    this.#elapsed = Math.max(0, elapsed);
    this.sink.onEnd(this);
  }
}
