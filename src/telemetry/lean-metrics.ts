/**
 * Lean metrics for what is counted once per proxied request.
 *
 * A Prometheus histogram with one label whose `observe` is a few array writes. prom-client's
 * Histogram converts, validates and hashes the label set on every observation, which was the
 * largest metrics cost per proxied request (docs/benchmarks.md "Hot path"). This one looks the
 * child up once per label value and keeps its buckets in a Float64Array. It is registered in a
 * prom-client Registry like any metric (`get`, `reset`), so the exposition is prom-client's own.
 */
import type { MetricObjectWithValues, MetricValueWithName, Registry } from 'prom-client';

export interface LeanHistogramChild {
  observe(value: number): void;
}

interface Series {
  labelValue: string;
  /** Per bucket (not cumulative); the last slot is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export interface LeanHistogramOptions<L extends string> {
  name: string;
  help: string;
  labelName: L;
  /** Upper bounds, ascending. */
  buckets: readonly number[];
  registers: readonly Registry[];
}

/** What a Registry needs of a metric (prom-client's Metric shape): it registers itself. */
abstract class LeanMetric {
  readonly name: string;
  readonly help: string;
  readonly aggregator = 'sum' as const;

  constructor(options: { name: string; help: string; registers: readonly Registry[] }) {
    this.name = options.name;
    this.help = options.help;
    for (const registry of options.registers) registry.registerMetric(this as never);
  }
}

export class LeanHistogram<L extends string> extends LeanMetric {
  readonly type = 'histogram' as const;
  readonly labelNames: readonly L[];
  readonly #labelName: L;
  readonly #bounds: readonly number[];
  #series = new Map<string, Series>();

  constructor(options: LeanHistogramOptions<L>) {
    super(options);
    this.#labelName = options.labelName;
    this.labelNames = [options.labelName];
    this.#bounds = [...options.buckets].sort((a, b) => a - b);
  }

  /** The child for one label value; keep it, its `observe` does no lookup. */
  labels(values: Record<L, string>): LeanHistogramChild {
    const labelValue = values[this.#labelName];
    let series = this.#series.get(labelValue);
    if (series === undefined) {
      series = {
        labelValue,
        counts: new Float64Array(this.#bounds.length + 1),
        sum: 0,
        count: 0,
      };
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

  get(): Promise<MetricObjectWithValues<MetricValueWithName<string>>> {
    const values: MetricValueWithName<string>[] = [];
    for (const s of this.#series.values()) {
      // Like prom-client: a series exists once observed (a child alone, or a reset, shows none).
      if (s.count === 0) continue;
      const label = { [this.#labelName]: s.labelValue };
      let cumulative = 0;
      this.#bounds.forEach((bound, i) => {
        cumulative += s.counts[i]!;
        values.push({
          labels: { le: bound, ...label },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        });
      });
      values.push({
        labels: { le: '+Inf', ...label },
        value: s.count,
        metricName: `${this.name}_bucket`,
      });
      values.push({ labels: label, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: label, value: s.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({
      name: this.name,
      help: this.help,
      type: 'histogram' as never,
      values,
      aggregator: this.aggregator,
      collect: () => undefined,
    });
  }

  reset(): void {
    for (const s of this.#series.values()) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}

export interface LeanCounterChild {
  inc(by?: number): void;
}

/**
 * A Prometheus counter whose children increment a number: prom-client's Counter hashes the label
 * set on every `inc` (docs/benchmarks.md "Hot path"). Same exposition, registered the same way.
 */
export class LeanCounter<L extends string> extends LeanMetric {
  readonly type = 'counter' as const;
  readonly labelNames: readonly L[];
  #series = new Map<string, { labels: Record<L, string>; value: number }>();

  constructor(options: {
    name: string;
    help: string;
    labelNames: readonly L[];
    registers: readonly Registry[];
  }) {
    super(options);
    this.labelNames = options.labelNames;
  }

  /** The child for one label set; keep it, its `inc` does no lookup. */
  labels(values: Record<L, string>): LeanCounterChild {
    const key = this.labelNames.map((name) => values[name]).join('\u0000');
    let series = this.#series.get(key);
    if (series === undefined) {
      const labels = {} as Record<L, string>;
      for (const name of this.labelNames) labels[name] = values[name];
      series = { labels, value: 0 };
      this.#series.set(key, series);
    }
    const s = series;
    return {
      inc(by = 1): void {
        s.value += by;
      },
    };
  }

  inc(values: Record<L, string>, by = 1): void {
    this.labels(values).inc(by);
  }

  get(): Promise<MetricObjectWithValues<MetricValueWithName<string>>> {
    const values: MetricValueWithName<string>[] = [];
    for (const s of this.#series.values()) {
      // Like prom-client: a series exists once incremented (a child alone, or a reset, shows none).
      if (s.value !== 0) values.push({ labels: { ...s.labels }, value: s.value });
    }
    return Promise.resolve({
      name: this.name,
      help: this.help,
      type: 'counter' as never,
      values,
      aggregator: this.aggregator,
      collect: () => undefined,
    });
  }

  reset(): void {
    for (const s of this.#series.values()) s.value = 0;
  }
}
