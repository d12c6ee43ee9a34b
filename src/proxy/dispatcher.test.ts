import * as undici from 'undici';
import { request } from 'undici';
import DeepAgent from 'undici/lib/dispatcher/agent.js';
import DeepPool from 'undici/lib/dispatcher/pool.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, startStandin, type Standin } from '../standin/index.js';
import { createUpstreamDispatcher, trustContext } from './dispatcher.js';
import { statusesOfGets } from '../../test/helpers/upstream.js';

describe('undici\'s classes by path (docs/design.md "Exceptions", src/types/undici-deep.d.ts)', () => {
  it('Pool is the very class the undici package exports: an upgrade that moves it fails here', () => {
    expect(DeepPool).toBe(undici.Pool);
    expect(createUpstreamDispatcher({ http2: false, origin: 'https://a.example' })).toBeInstanceOf(
      undici.Pool,
    );
  });

  it('Agent is the very class the undici package exports: an upgrade that moves it fails here', () => {
    expect(DeepAgent).toBe(undici.Agent);
    expect(createUpstreamDispatcher({ http2: false })).toBeInstanceOf(undici.Agent);
  });
});

describe('createUpstreamDispatcher', () => {
  let standin: Standin;
  beforeAll(async () => {
    standin = await startStandin();
  });
  afterAll(async () => {
    await standin.close();
  });

  it('trusts the extra CA through one shared context, for several dispatchers', async () => {
    const shared = trustContext(standin.caCert);
    for (const dispatcher of [
      createUpstreamDispatcher({ ca: shared, http2: false }),
      createUpstreamDispatcher({ ca: shared, http2: true }),
      createUpstreamDispatcher({ ca: standin.caCert, http2: false }),
    ]) {
      const res = await request(`${standin.url}/v1.0/contracts/`, { dispatcher });
      expect(res.statusCode).toBe(401); // reached the API over verified TLS (no bearer sent)
      await res.body.text();
      await dispatcher.close();
    }
  });

  it('keeps TLS verification on: a server signed by another CA is refused', async () => {
    const other = await createTestPki();
    const dispatcher = createUpstreamDispatcher({ ca: trustContext(other.caCert), http2: false });
    await expect(request(`${standin.url}/v1.0/contracts/`, { dispatcher })).rejects.toThrow(
      /certificate/i,
    );
    await dispatcher.close();
  });

  it('refuses the throwaway CA with the system roots alone', async () => {
    const dispatcher = createUpstreamDispatcher({ http2: false });
    await expect(request(`${standin.url}/v1.0/contracts/`, { dispatcher })).rejects.toThrow(
      /certificate/i,
    );
    await dispatcher.close();
  });

  it('serves its one origin with at most `connections` sockets', async () => {
    const dispatcher = createUpstreamDispatcher({
      ca: standin.caCert,
      http2: false,
      connections: 2,
      origin: standin.url,
    });
    const connected = new Set<unknown>();
    dispatcher.on('connect', (_origin, targets) => connected.add(targets.at(-1)));
    const answers = await statusesOfGets(`${standin.url}/v1.0/contracts/`, dispatcher);
    expect(answers.every((status) => status === 401)).toBe(true);
    expect(connected.size).toBeLessThanOrEqual(2);
    await dispatcher.close();
  });
});
