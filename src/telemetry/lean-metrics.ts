/**
 * A prom-client Counter for what is counted once per proxied request: a child (`child(labels)`),
 * looked up once per label set, increments a plain number; prom-client's own `inc` validates and
 * hashes the label set on every call (docs/benchmarks.md "Hot path"). The numbers reach the
 * counter through its public `collect` hook, at scrape time, so the exposition is prom-client's.
 */
import { Counter, type Registry } from 'prom-client';

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
