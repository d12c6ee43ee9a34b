/** The request path as it ships, started from a configuration against a bare HTTPS upstream. */
import * as undici from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../clock.js';
import { loadConfig } from '../config/load.js';
import { createTestPki, type TestPki } from '../standin/index.js';
import { createMetricsRegistry } from '../telemetry/exposition.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { startCountingUpstream, type CountingUpstream } from '../../test/helpers/upstream.js';
import { startProxyStack } from './proxy-stack.js';
import { Teardown } from './teardown.js';

let pki: TestPki;
let upstream: CountingUpstream;
const authorizations: (string | undefined)[] = [];

beforeAll(async () => {
  pki = await createTestPki();
  upstream = await startCountingUpstream(pki, (req, res, done) => {
    authorizations.push(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"n":1}');
    done();
  });
});
afterAll(async () => {
  await upstream?.close();
});

async function start(env: Record<string, string>) {
  const config = await loadConfig({
    env: {
      UPSTREAM_BASE_URL: upstream.url,
      CLIENT_ID: 'id',
      CLIENT_SECRET: 'secret',
      PROXY_LISTEN: '127.0.0.1:0',
      ...env,
    },
  });
  const teardown = new Teardown();
  const stack = await startProxyStack(config, {
    tokens: { getAccessToken: () => Promise.resolve('stack-token'), invalidate: () => 'keep' },
    metrics: createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false }),
    logger: createLogger({ level: 'silent' }),
    requestLog: undefined,
    clock: systemClock,
    teardown,
    ca: pki.caCert,
  });
  return { stack, teardown, url: `http://127.0.0.1:${stack.proxy.address.port}` };
}

describe('startProxyStack', () => {
  it('forwards with the bearer through a Pool; a cache rule answers the second GET itself', async () => {
    const { stack, teardown, url } = await start({ CACHE_RULES: '/v1.0/contracts/=60' });
    try {
      expect(stack.dispatcher).toBeInstanceOf(undici.Pool);
      expect(stack.callers).toBeUndefined();
      expect(stack.cache).toBeDefined();
      const before = upstream.requests;
      for (let i = 0; i < 2; i++) {
        const res = await undici.request(`${url}/v1.0/contracts/`);
        expect(res.statusCode).toBe(200);
        expect(await res.body.text()).toBe('{"n":1}');
      }
      expect(upstream.requests - before).toBe(1);
      expect(authorizations.at(-1)).toBe('Bearer stack-token');
    } finally {
      await teardown.run();
    }
    // The teardown drained the listener and closed the pool.
    await expect(undici.request(`${url}/v1.0/contracts/`)).rejects.toThrow();
    await expect(
      undici.request(`${upstream.url}/v1.0/contracts/`, { dispatcher: stack.dispatcher }),
    ).rejects.toThrow(/client is (closed|destroyed)/);
  });

  it('without cache rules has no cache; with HTTPS_PROXY the pool is the egress ProxyAgent', async () => {
    const { stack, teardown } = await start({ HTTPS_PROXY: 'http://127.0.0.1:9' });
    try {
      expect(stack.cache).toBeUndefined();
      expect(stack.dispatcher).toBeInstanceOf(undici.ProxyAgent);
    } finally {
      await teardown.run();
    }
  });
});
