/**
 * A prom-client Counter for what is counted once per proxied request: a child (`child(labels)`),
 * looked up once per label set, increments a plain number; prom-client's own `inc` validates and
 * hashes the label set on every call (docs/benchmarks.md "Hot path"). The numbers reach the
 * counter through its public `collect` hook, at scrape time, so the exposition is prom-client's.
 */
import { Counter, Registry } from 'prom-client';

export interface LeanCounterChild {
  inc(by?: number): void;
}

interface Series<L extends string> {
  labels: Record<L, string>;
  /** Counted since the last scrape. */
  pending: number;
}

export class LeanCounter<L extends string> extends Counter<L> {
  readonly #labelNames: readonly L[];
  readonly #series = new Map<string, Series<L>>();

  constructor(options: {
    name: string;
    help: string;
    labelNames: readonly L[];
    registers: Registry[];
  }) {
    super({
      ...options,
      collect(this: Counter<L>) {
        (this as LeanCounter<L>).#flush();
      },
    });
    this.#labelNames = options.labelNames;
  }

  /** The child for one label set; keep it, its `inc` does no lookup. */
  child(values: Record<L, string>): LeanCounterChild {
    const key = this.#labelNames.map((name) => values[name]).join('\u0000');
    let series = this.#series.get(key);
    if (series === undefined) {
      const labels = {} as Record<L, string>;
      for (const name of this.#labelNames) labels[name] = values[name];
      series = { labels, pending: 0 };
      this.#series.set(key, series);
    }
    const s = series;
    return {
      inc(by = 1): void {
        s.pending += by;
      },
    };
  }

  #flush(): void {
    for (const s of this.#series.values()) {
      if (s.pending === 0) continue;
      this.inc(s.labels, s.pending);
      s.pending = 0;
    }
  }

  override reset(): void {
    super.reset();
    // prom-client's constructor resets before this class's fields exist.
    if (!(#series in this)) return;
    for (const s of this.#series.values()) s.pending = 0;
  }
}

export interface LeanHistogramChild {
  /** `traceId`: a sampled trace's id, kept as the bucket's exemplar (OpenMetrics scrapes). */
  observe(value: number, traceId?: string): void;
}

/** The last sampled observation of a bucket (OpenMetrics exemplar). */
interface Exemplar {
  traceId: string;
  value: number;
  /** Seconds since the epoch. */
  at: number;
}

interface HistogramSeries {
  labelValue: string;
  /** Per bucket (not cumulative); the last slot is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
  /** Per bucket, created on the first traced observation. */
  exemplars: (Exemplar | undefined)[] | undefined;
}

/** A label value as Prometheus text escapes it. */
function escaped(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/**
 * A histogram with one label whose child's `observe` is a few array writes; prom-client's
 * validates and hashes the label set on every observation (its cost per request:
 * docs/benchmarks.md "Hot path"). Exposed by {@link LeanRegistry} in prom-client's text.
 */
export class LeanHistogram<L extends string> {
  readonly #series = new Map<string, HistogramSeries>();
  readonly #bounds: readonly number[];

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelName: L,
    buckets: readonly number[],
  ) {
    this.#bounds = [...buckets].sort((a, b) => a - b);
  }

  /** The child for one label value; keep it, its `observe` does no lookup. */
  labels(values: Record<L, string>): LeanHistogramChild {
    const labelValue = values[this.labelName];
    let series = this.#series.get(labelValue);
    if (series === undefined) {
      const counts = new Float64Array(this.#bounds.length + 1);
      series = { labelValue, counts, sum: 0, count: 0, exemplars: undefined };
      this.#series.set(labelValue, series);
    }
    const bounds = this.#bounds;
    const s = series;
    return {
      observe(value: number, traceId?: string): void {
        if (!Number.isFinite(value)) return;
        let i = 0;
        while (i < bounds.length && value > bounds[i]!) i += 1;
        s.counts[i]! += 1;
        s.sum += value;
        s.count += 1;
        if (traceId !== undefined) {
          s.exemplars ??= [];
          // One object per bucket, rewritten: no allocation per traced observation.
          const e = s.exemplars[i];
          if (e === undefined) s.exemplars[i] = { traceId, value, at: Date.now() / 1000 };
          else {
            e.traceId = traceId;
            e.value = value;
            e.at = Date.now() / 1000;
          }
        }
      },
    };
  }

  observe(values: Record<L, string>, value: number): void {
    this.labels(values).observe(value);
  }

  /**
   * Prometheus text, as prom-client writes a histogram: a series exists once observed. With
   * `exemplars` (an OpenMetrics scrape) each bucket carries the trace id of its last sampled
   * observation.
   */
  exposition(exemplars = false): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.#series.values()) {
      if (s.count === 0) continue;
      const label = `${this.labelName}="${escaped(s.labelValue)}"`;
      let cumulative = 0;
      const exemplar = (i: number): string => {
        const e = exemplars ? s.exemplars?.[i] : undefined;
        return e === undefined ? '' : ` # {trace_id="${e.traceId}"} ${e.value} ${e.at.toFixed(3)}`;
      };
      this.#bounds.forEach((bound, i) => {
        cumulative += s.counts[i]!;
        lines.push(`${this.name}_bucket{le="${bound}",${label}} ${cumulative}${exemplar(i)}`);
      });
      lines.push(
        `${this.name}_bucket{le="+Inf",${label}} ${s.count}${exemplar(this.#bounds.length)}`,
      );
      lines.push(`${this.name}_sum{${label}} ${s.sum}`);
      lines.push(`${this.name}_count{${label}} ${s.count}`);
    }
    return lines.join('\n');
  }

  reset(): void {
    for (const s of this.#series.values()) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
      s.exemplars = undefined;
    }
  }
}

/** A prom-client Registry that also exposes the lean histograms attached to it. */
export class LeanRegistry extends Registry {
  readonly #lean: LeanHistogram<string>[] = [];

  attach(histogram: LeanHistogram<string>): void {
    this.#lean.push(histogram);
  }

  override async metrics(): Promise<string> {
    return this.#text(false);
  }

  /**
   * The OpenMetrics text (what Prometheus asks for to read exemplars): the same families, counter
   * families named without `_total`, the lean histograms with their exemplars, `# EOF` last.
   */
  async openMetrics(): Promise<string> {
    return `${toOpenMetrics(await this.#text(true))}# EOF\n`;
  }

  async #text(exemplars: boolean): Promise<string> {
    const text = (await super.metrics()).replace(/\n$/, '');
    const parts = [text, ...this.#lean.map((h) => h.exposition(exemplars))].filter((p) => p !== '');
    return `${parts.join('\n\n')}\n`;
  }

  override resetMetrics(): void {
    super.resetMetrics();
    for (const histogram of this.#lean) histogram.reset();
  }
}

export const OPENMETRICS_CONTENT_TYPE =
  'application/openmetrics-text; version=1.0.0; charset=utf-8';

/**
 * Prometheus text to OpenMetrics text: a counter family is named without its `_total` suffix in
 * `# HELP`/`# TYPE` (its samples keep it; one without the suffix gets it), blank lines go.
 */
export function toOpenMetrics(text: string): string {
  const lines = text.split('\n').filter((line) => line !== '');
  const counters = new Set<string>();
  for (const line of lines) {
    const match = /^# TYPE (\S+) counter$/.exec(line);
    if (match) counters.add(match[1]!);
  }
  const family = (name: string): string => name.replace(/_total$/, '');
  const out = lines.map((line) => {
    const meta = /^# (HELP|TYPE) (\S+)(.*)$/.exec(line);
    if (meta) return counters.has(meta[2]!) ? `# ${meta[1]} ${family(meta[2]!)}${meta[3]}` : line;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(.*)$/.exec(line);
    if (sample && counters.has(sample[1]!) && !sample[1]!.endsWith('_total')) {
      return `${sample[1]}_total${sample[2]}`;
    }
    return line;
  });
  return `${out.join('\n')}\n`;
}
