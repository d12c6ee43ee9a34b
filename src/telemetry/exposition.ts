/**
 * The /metrics answer from one prom-client registry: its OpenMetrics text (with the request
 * histogram's exemplars) when the scraper asks for it, else the Prometheus text. prom-client keeps
 * exemplars only on a registry made for OpenMetrics, so the registry is one, switched to the
 * Prometheus text (`setContentType`) for a scrape that did not ask for OpenMetrics.
 *
 * prom-client renders OpenMetrics by renaming each counter in place (`_total` dropped from the
 * metric's `name`) and never renames it back, so a text scrape after an OpenMetrics one would
 * name the counter families without `_total` (prometheus/client_js#829). The names are put back
 * after each rendering, and renderings run one at a time, so no scrape sees another's state.
 */
import { Registry, type OpenMetricsContentType, type RegistryContentType } from 'prom-client';

/** The registry every metric is registered on: made for OpenMetrics (exemplars). */
export type MetricsRegistry = Registry<OpenMetricsContentType>;

export function createMetricsRegistry(): MetricsRegistry {
  // prom-client's typings declare no constructor argument; its constructor takes the content type.
  const OpenMetricsRegistry = Registry as unknown as new (type: string) => MetricsRegistry;
  return new OpenMetricsRegistry(Registry.OPENMETRICS_CONTENT_TYPE);
}

export interface Exposition {
  body: string;
  contentType: RegistryContentType;
}

/** An Accept naming OpenMetrics (Prometheus sends it first when it wants exemplars). */
export function wantsOpenMetrics(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes('application/openmetrics-text');
}

async function render(metrics: MetricsRegistry, contentType: RegistryContentType): Promise<string> {
  // prom-client types a registry with one content type; `setContentType` switches it.
  const registry = metrics as unknown as Registry<RegistryContentType>;
  const names = registry.getMetricsAsArray().map((metric) => [metric, metric.name] as const);
  registry.setContentType(contentType);
  try {
    return await registry.metrics();
  } finally {
    registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
    for (const [metric, name] of names) metric.name = name;
  }
}

/** The rendering in progress per registry: the next one waits for it. */
const rendering = new WeakMap<MetricsRegistry, Promise<unknown>>();

/** `registry` as the scraper asks (its Accept header); one rendering of a registry at a time. */
export function expose(registry: MetricsRegistry, accept: string | undefined): Promise<Exposition> {
  const contentType = wantsOpenMetrics(accept)
    ? Registry.OPENMETRICS_CONTENT_TYPE
    : Registry.PROMETHEUS_CONTENT_TYPE;
  const next = (rendering.get(registry) ?? Promise.resolve()).then(async () => ({
    body: await render(registry, contentType),
    contentType,
  }));
  rendering.set(
    registry,
    next.catch(() => undefined),
  );
  return next;
}
