import { createServer as createHttpsServer } from 'node:https';
import { EventEmitter } from 'node:events';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import * as undici from 'undici';
import { request } from 'undici';
import deepBuildConnector from 'undici/lib/core/connect.js';
import DeepAgent from 'undici/lib/dispatcher/agent.js';
import DeepPool from 'undici/lib/dispatcher/pool.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, startStandin, type Standin } from '../standin/index.js';
import { socketCap } from './connection-cap.js';
import { createUpstreamDispatcher, trustContext } from './dispatcher.js';
import { getsAcrossAFailure, statusesOfGets } from '../../test/helpers/upstream.js';

describe('undici\'s classes by path (docs/design.md "Exceptions", src/types/undici-deep.d.ts)', () => {
  it('Pool is the very class the undici package exports: an upgrade that moves it fails here', () => {
    expect(DeepPool).toBe(undici.Pool);
    expect(createUpstreamDispatcher({ http2: false, origin: 'https://a.example' })).toBeInstanceOf(
      undici.Pool,
    );
  });

  it('buildConnector is the very function the undici package exports', () => {
    expect(deepBuildConnector).toBe(undici.buildConnector);
  });

  it('Agent is the very class the undici package exports: an upgrade that moves it fails here', () => {
    expect(DeepAgent).toBe(undici.Agent);
    expect(createUpstreamDispatcher({ http2: false })).toBeInstanceOf(undici.Agent);
  });
});

describe('the upstream connection cap', () => {
  it('socketCap: a connection beyond the cap waits for an open one to close; a failed one frees its place', () => {
    const sockets: EventEmitter[] = [];
    let fail = false;
    const connect: undici.buildConnector.connector = (_options, callback) => {
      if (fail) {
        callback(new Error('ECONNRESET'), null);
        return;
      }
      const socket = new EventEmitter();
      sockets.push(socket);
      callback(null, socket as Socket);
    };
    const capped = socketCap(2)(connect);
    const got: string[] = [];
    const dial = (name: string) =>
      capped({ hostname: 'a', protocol: 'https:', port: '443' }, (...[error]) => {
        got.push(error === null ? name : `${name} failed`);
      });
    dial('a');
    dial('b');
    dial('c');
    expect(got).toEqual(['a', 'b']);
    sockets[0]!.emit('close');
    expect(got).toEqual(['a', 'b', 'c']);
    fail = true;
    dial('d');
    sockets[1]!.emit('close');
    expect(got).toEqual(['a', 'b', 'c', 'd failed']);
    fail = false;
    dial('e');
    expect(got).toEqual(['a', 'b', 'c', 'd failed', 'e']);
    dial('f');
    expect(got).toHaveLength(5);
  });

  it('holds the cap when connection attempts fail while requests wait', async () => {
    const pki = await createTestPki();
    const api = createHttpsServer({ cert: pki.serverCert, key: pki.serverKey }, (_req, res) =>
      res.end('ok'),
    );
    // In front of the API: the first `resets` connections are reset (a failed connection
    // attempt); the others are handed to the API, and counted while open.
    let resets = 2;
    let open = 0;
    let maxOpen = 0;
    const front = createNetServer((socket) => {
      if (resets > 0) {
        resets -= 1;
        socket.resetAndDestroy();
        return;
      }
      open += 1;
      maxOpen = Math.max(maxOpen, open);
      socket.on('close', () => (open -= 1));
      api.emit('connection', socket);
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    const origin = `https://127.0.0.1:${(front.address() as AddressInfo).port}`;
    const dispatcher = createUpstreamDispatcher({
      ca: pki.caCert,
      http2: false,
      connections: 2,
      origin,
    });
    try {
      expect(await getsAcrossAFailure(`${origin}/`, dispatcher)).toBeGreaterThan(0);
      expect(maxOpen).toBeLessThanOrEqual(2);
    } finally {
      await dispatcher.close();
      front.close();
      api.close();
    }
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
