import { createMetricsRegistry } from '../telemetry/exposition.js';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../telemetry/metrics.js';
import { createAdminApp, type AdminState } from './admin-app.js';

function setup(overrides: Partial<AdminState> = {}) {
  const registry = createMetricsRegistry();
  const metrics = createMetrics({ registry, defaultMetrics: false });
  let ready = true;
  let draining = false;
  const state: AdminState = {
    tokenReady: () => ready,
    isDraining: () => draining,
    tokenStatus: () => ({ lastGrant: 'client_credentials', refreshTokenHeld: true }),
    ...overrides,
  };
  metrics.bindTokenState({
    status: () => ({
      ready,
      tokenAgeSeconds: ready ? 12 : null,
      expiresInSeconds: ready ? 1787 : 0,
    }),
  });
  const app = createAdminApp({ registry, state, version: '0.1.0', startedAt: 0, now: () => 5000 });
  return {
    app,
    metrics,
    setReady: (v: boolean) => (ready = v),
    setDraining: (v: boolean) => (draining = v),
  };
}

describe('admin app', () => {
  it('/healthz is 200 whatever the token state', async () => {
    const { app, setReady } = setup();
    setReady(false);
    const res = await app.request('/healthz');
    expect(res.status).toBe(200);
  });

  it('/readyz follows the token and the drain flag, with a reason', async () => {
    const { app, setReady, setDraining } = setup();
    expect((await app.request('/readyz')).status).toBe(200);
    setReady(false);
    let res = await app.request('/readyz');
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({
      reason: expect.stringContaining('no valid access token'),
    });
    setReady(true);
    setDraining(true);
    res = await app.request('/readyz');
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ reason: 'shutting down' });
  });

  it('/metrics exposes every metric name of docs/reference.md in Prometheus text format', async () => {
    const { app, metrics } = setup();
    metrics.tokenRequests.inc({ grant: 'client_credentials', outcome: 'success' });
    metrics.upstreamRequests.inc({ method: 'GET', code: '200' });
    metrics.upstreamUnauthorized.inc({ replayed: 'true' });
    metrics.proxyRejected.inc({ code: 'not_found' });
    metrics.tokenRequestDuration.observe({ grant: 'client_credentials' }, 0.1);
    metrics.upstreamRequestDuration.observe({ labels: { method: 'GET' }, value: 0.01 });
    const res = await app.request('/metrics');
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    for (const name of [
      'oauth_sidecar_token_age_seconds 12',
      'oauth_sidecar_token_expires_in_seconds 1787',
      'oauth_sidecar_token_ready 1',
      'oauth_sidecar_token_requests_total{grant="client_credentials",outcome="success"} 1',
      'oauth_sidecar_token_request_duration_seconds_bucket',
      'oauth_sidecar_upstream_requests_total{method="GET",code="200"} 1',
      'oauth_sidecar_upstream_request_duration_seconds_bucket',
      'oauth_sidecar_upstream_unauthorized_total{replayed="true"} 1',
      'oauth_sidecar_proxy_rejected_total{code="not_found"} 1',
      'oauth_sidecar_requests_in_flight 0',
    ]) {
      expect(text).toContain(name);
    }
  });

  it('/metrics reports token age 0, expiry 0 and ready 0 when no token is held', async () => {
    const { app, setReady } = setup();
    setReady(false);
    const text = await (await app.request('/metrics')).text();
    expect(text).toMatch(/^oauth_sidecar_token_age_seconds 0$/m);
    expect(text).toMatch(/^oauth_sidecar_token_ready 0$/m);
    expect(text).toMatch(/^oauth_sidecar_token_expires_in_seconds 0$/m);
  });

  it('/status carries the keeper state, uptime and readiness', async () => {
    const { app } = setup();
    const body = await (await app.request('/status')).json();
    expect(body).toEqual({
      version: '0.1.0',
      uptimeSeconds: 5,
      ready: true,
      draining: false,
      token: { lastGrant: 'client_credentials', refreshTokenHeld: true },
    });
  });

  it('/status shows the response cache entries and bytes when given', async () => {
    const { app } = setup({
      cacheStatus: () => ({ enabled: true, entries: 3, bytes: 2048, maxBytes: 4096 }),
    });
    const body = (await (await app.request('/status')).json()) as { cache: unknown };
    expect(body.cache).toEqual({ enabled: true, entries: 3, bytes: 2048, maxBytes: 4096 });
  });

  it('answers unknown admin paths with 404 in the envelope', async () => {
    const { app } = setup();
    const res = await app.request('/v1.0/contracts/');
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ errors: [{ code: 'not_found' }] });
  });
});
