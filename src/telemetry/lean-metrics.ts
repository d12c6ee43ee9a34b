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
  observe(value: number): void;
}

interface HistogramSeries {
  labelValue: string;
  /** Per bucket (not cumulative); the last slot is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

/** A label value as Prometheus text escapes it. */
function escaped(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/**
 * A histogram with one label whose child's `observe` is a few array writes; prom-client's
 * validates and hashes the label set on every observation (about 1 % of the CPU per request,
 * docs/benchmarks.md "Consolidation"). Exposed by {@link LeanRegistry} in prom-client's text.
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
      series = { labelValue, counts, sum: 0, count: 0 };
      this.#series.set(labelValue, series);
    }
    const bounds = this.#bounds;
    const s = series;
    return {
      observe(value: number): void {
        if (!Number.isFinite(value)) return;
        let i = 0;
        while (i < bounds.length && value > bounds[i]!) i += 1;
        s.counts[i]! += 1;
        s.sum += value;
        s.count += 1;
      },
    };
  }

  observe(values: Record<L, string>, value: number): void {
    this.labels(values).observe(value);
  }

  /** Prometheus text, as prom-client writes a histogram: a series exists once observed. */
  exposition(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.#series.values()) {
      if (s.count === 0) continue;
      const label = `${this.labelName}="${escaped(s.labelValue)}"`;
      let cumulative = 0;
      this.#bounds.forEach((bound, i) => {
        cumulative += s.counts[i]!;
        lines.push(`${this.name}_bucket{le="${bound}",${label}} ${cumulative}`);
      });
      lines.push(`${this.name}_bucket{le="+Inf",${label}} ${s.count}`);
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
    const text = (await super.metrics()).replace(/\n$/, '');
    const parts = [text, ...this.#lean.map((h) => h.exposition())].filter((p) => p !== '');
    return `${parts.join('\n\n')}\n`;
  }

  override resetMetrics(): void {
    super.resetMetrics();
    for (const histogram of this.#lean) histogram.reset();
  }
}
