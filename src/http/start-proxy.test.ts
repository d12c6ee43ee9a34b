/** The proxy listener as main.ts starts it, against a bare HTTPS upstream on loopback. */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUpstreamDispatcher } from '../proxy/dispatcher.js';
import { createTestPki } from '../standin/index.js';
import { createMetricsRegistry } from '../telemetry/exposition.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { startCountingUpstream, type CountingUpstream } from '../../test/helpers/upstream.js';
import { startProxy, type RunningProxy } from './start-proxy.js';

let upstream: CountingUpstream;
let proxy: RunningProxy;
const seen: { url: string | undefined; authorization: string | undefined }[] = [];
const invalidated: string[] = [];

beforeAll(async () => {
  const pki = await createTestPki();
  upstream = await startCountingUpstream(pki, (req, res, done) => {
    seen.push({ url: req.url, authorization: req.headers.authorization });
    res.writeHead(req.headers.authorization === 'Bearer stale' ? 401 : 200).end('answered');
    done();
  });
  const dispatcher = createUpstreamDispatcher({
    ca: pki.caCert,
    http2: false,
    origin: upstream.url,
  });
  let token = 'stale';
  proxy = await startProxy(
    {
      upstream: {
        baseUrl: upstream.url,
        pathPrefixes: ['/v1.0/'],
        timeoutMs: 10_000,
        bodyTimeoutMs: 10_000,
      },
      proxy: {
        listen: { host: '127.0.0.1', port: 0 },
        http2: false,
        maxInFlight: 8,
        maxPipelined: 1,
        maxHeaders: 100,
        bodyTimeoutMs: 10_000,
      },
    },
    {
      dispatcher,
      tokens: {
        getAccessToken: () => Promise.resolve(token),
        invalidate: (old) => {
          invalidated.push(old);
          token = 'fresh';
          return 'replay';
        },
      },
      metrics: createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false }),
      logger: createLogger({ level: 'silent' }),
      requestLog: undefined,
    },
  );
});

afterAll(async () => {
  await proxy?.drain(0);
  await upstream?.close();
});

describe('startProxy', () => {
  it('forwards an allowed path with the bearer, replaying once after a 401', async () => {
    const res = await request(`http://127.0.0.1:${proxy.address.port}/v1.0/contracts/?a=1`);
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toBe('answered');
    expect(seen).toEqual([
      { url: '/v1.0/contracts/?a=1', authorization: 'Bearer stale' },
      { url: '/v1.0/contracts/?a=1', authorization: 'Bearer fresh' },
    ]);
    expect(invalidated).toEqual(['stale']);
  });

  it('refuses a path outside the prefixes without calling the upstream', async () => {
    const before = upstream.requests;
    const res = await request(`http://127.0.0.1:${proxy.address.port}/admin/secrets`);
    await res.body.text();
    expect(res.statusCode).toBe(404);
    expect(upstream.requests).toBe(before);
  });

  it('stops accepting once drained', async () => {
    expect(proxy.isDraining()).toBe(false);
    await proxy.drain(0);
    expect(proxy.isDraining()).toBe(true);
    await expect(request(`http://127.0.0.1:${proxy.address.port}/v1.0/x`)).rejects.toThrow();
  });
});
