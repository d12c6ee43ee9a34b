import { Hono } from 'hono';
import { expose, type MetricsRegistry } from '../telemetry/exposition.js';

/** What the admin endpoints read; the composition root adapts the keeper and the drain flag to it. */
export interface AdminState {
  /** A valid access token is held. */
  tokenReady(): boolean;
  /** SIGTERM/SIGINT received: the proxy is draining. */
  isDraining(): boolean;
  /** JSON-safe token keeper state for /status. Never a token or a secret. */
  tokenStatus(): Record<string, unknown>;
  /** The shared token store (URL without password, up, lastError, generation); absent without one. */
  storeStatus?(): Record<string, unknown>;
  /** Response cache entries and bytes for /status; absent: not shown. */
  cacheStatus?(): Record<string, unknown>;
  /** The egress proxy (without its user-info) and which origins go through it; absent without one. */
  egressStatus?(): object | undefined;
  /** JSON-safe quota guard state (cooldown, bucket, fleet/local) for /status. */
  quotaStatus?(): unknown;
  /** With `callers.auth: jwt`: a key set is held to verify callers with. */
  callerKeysReady?(): boolean;
  /** With `callers.auth: jwt`: where the keys come from, their ids, when fetched, the last error. */
  callersStatus?(): object;
}

export interface AdminAppOptions {
  registry: MetricsRegistry;
  state: AdminState;
  version: string;
  /** When the process started (ms since epoch), for /status. */
  startedAt: number;
  now: () => number;
}

/**
 * The admin listener (docs/reference.md "Admin endpoints"): liveness never depends on the token endpoint;
 * readiness is "a valid token is held and we are not draining".
 */
export function createAdminApp(options: AdminAppOptions): Hono {
  const { registry, state } = options;
  const app = new Hono();

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', (c) => {
    const reason = state.isDraining()
      ? 'shutting down'
      : !state.tokenReady()
        ? 'no valid access token yet (see /status for the last token endpoint error)'
        : state.callerKeysReady?.() === false
          ? 'no caller keys yet (see /status callers.lastError)'
          : undefined;
    if (reason !== undefined) return c.json({ status: 'not ready', reason }, 503);
    return c.json({ status: 'ready' });
  });

  app.get('/metrics', async (c) => {
    // Prometheus asks for OpenMetrics to read exemplars (the trace ids of the duration histogram).
    const { body, contentType } = await expose(registry, c.req.header('accept'));
    return c.body(body, 200, { 'content-type': contentType });
  });

  app.get('/status', (c) =>
    c.json({
      version: options.version,
      uptimeSeconds: Math.round((options.now() - options.startedAt) / 1000),
      ready: state.tokenReady() && state.callerKeysReady?.() !== false && !state.isDraining(),
      draining: state.isDraining(),
      token: state.tokenStatus(),
      ...(state.storeStatus !== undefined && { store: state.storeStatus() }),
      ...(state.cacheStatus ? { cache: state.cacheStatus() } : {}),
      quota: state.quotaStatus?.(),
      egress: state.egressStatus?.(),
      ...(state.callersStatus !== undefined && { callers: state.callersStatus() }),
    }),
  );

  app.notFound((c) =>
    c.json(
      {
        errors: [
          { code: 'not_found', detail: 'admin endpoints: /healthz /readyz /metrics /status' },
        ],
      },
      404,
    ),
  );
  return app;
}
