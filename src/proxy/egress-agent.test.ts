/**
 * The dispatcher through an egress proxy, against a small CONNECT proxy made here (it answers a
 * chosen status or opens the tunnel) and the stand-in over HTTPS; the real forward proxy runs in
 * test/egress-proxy.test.ts.
 */
import diagnostics from 'node:diagnostics_channel';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type Socket } from 'node:net';
import * as undici from 'undici';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EgressProxyError } from '../errors.js';
import { createTestPki, startStandin, type Standin } from '../standin/index.js';
import { createDispatcher, trustContext } from './dispatcher.js';
import { createEgressDispatcher, headerObject, keepRepeatedHeaders } from './egress-agent.js';
import { getsAcrossAFailure, statusesOfGets } from '../../test/helpers/upstream.js';

interface TestProxy {
  url: string;
  /** CONNECT requests seen: target and Proxy-Authorization. */
  seen: { target: string; auth: string | undefined }[];
  /** The answer to CONNECT: 200 opens the tunnel. */
  answer: number;
  /** This many CONNECTs to come are reset instead of answered (a failed connection attempt). */
  resets: number;
  /** Tunnels open now, and the most open at once. */
  open: number;
  maxOpen: number;
  server: Server;
}

async function startTestProxy(): Promise<TestProxy> {
  const proxy: TestProxy = {
    url: '',
    seen: [],
    answer: 200,
    resets: 0,
    open: 0,
    maxOpen: 0,
    server: createServer(),
  };
  const sockets = new Set<Socket>();
  proxy.server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    sockets.add(client);
    const target = req.url ?? '';
    proxy.seen.push({ target, auth: req.headers['proxy-authorization'] });
    if (proxy.resets > 0) {
      proxy.resets -= 1;
      client.resetAndDestroy();
      return;
    }
    if (proxy.answer !== 200) {
      client.end(`HTTP/1.1 ${proxy.answer} No\r\ncontent-length: 0\r\n\r\n`);
      return;
    }
    proxy.open += 1;
    proxy.maxOpen = Math.max(proxy.maxOpen, proxy.open);
    client.once('close', () => (proxy.open -= 1));
    const [host, port] = [target.slice(0, target.lastIndexOf(':')), target.split(':').pop()];
    const upstream = connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  proxy.server.on('close', () => sockets.forEach((socket) => socket.destroy()));
  await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
  const address = proxy.server.address() as { port: number };
  proxy.url = `http://127.0.0.1:${address.port}`;
  return proxy;
}

let standin: Standin;
let proxy: TestProxy;
const dispatchers: undici.Dispatcher[] = [];

beforeAll(async () => {
  standin = await startStandin({ http2: true });
  proxy = await startTestProxy();
});
afterEach(async () => {
  await Promise.all(dispatchers.splice(0).map((d) => d.destroy()));
  proxy.seen = [];
  proxy.answer = 200;
  proxy.resets = 0;
  proxy.maxOpen = proxy.open;
});
afterAll(async () => {
  proxy.server.closeAllConnections();
  await new Promise((resolve) => proxy.server.close(resolve));
  await standin.close();
});

async function through(
  proxyUrl: string,
  options: { http2?: boolean; connections?: number } = {},
): Promise<undici.Dispatcher> {
  const dispatcher = await createDispatcher({
    ca: trustContext(standin.caCert),
    http2: options.http2 ?? false,
    connections: options.connections,
    origin: standin.url,
    proxy: proxyUrl,
  });
  dispatchers.push(dispatcher);
  return dispatcher;
}

describe('repeated header names through ProxyAgent', () => {
  it('become arrays in the order they came, so none is lost', () => {
    expect(headerObject(['a', '1', 'b', '2', 'a', '3', 'a', '4'])).toEqual({
      a: ['1', '3', '4'],
      b: '2',
    });
    expect(headerObject([])).toEqual({});
  });

  it('are folded by the interceptor only when the headers come as a list', () => {
    const seen: undici.Dispatcher.DispatchOptions[] = [];
    const dispatch = keepRepeatedHeaders((options) => {
      seen.push(options);
      return true;
    });
    const handler = { onRequestStart: () => undefined } as undici.Dispatcher.DispatchHandler;
    const base = { origin: 'https://a.example', path: '/', method: 'GET' as const };
    dispatch({ ...base, headers: ['x', '1', 'x', '2'] }, handler);
    const object = { y: '3' };
    dispatch({ ...base, headers: object }, handler);
    expect(seen[0]?.headers).toEqual({ x: ['1', '2'] });
    expect(seen[1]?.headers).toBe(object);
  });
});

describe('the egress dispatcher', () => {
  it("is undici's ProxyAgent, the package's public export", async () => {
    expect(await through(proxy.url)).toBeInstanceOf(undici.ProxyAgent);
  });

  it('is made by createEgressDispatcher alone, with no trust beyond the system roots', async () => {
    const dispatcher = createEgressDispatcher({
      proxy: proxy.url,
      secureContext: undefined,
      http2: false,
      connections: null,
      keepAliveTimeout: 1_000,
    });
    dispatchers.push(dispatcher);
    // The tunnel opens (the proxy saw CONNECT), then TLS refuses the stand-in's throwaway CA.
    await expect(request(`${standin.url}/v1.0/contracts/`, { dispatcher })).rejects.toThrow(
      /certificate/i,
    );
    expect(proxy.seen.map((seen) => seen.target)).toContain(`127.0.0.1:${standin.port}`);
  });

  it('tunnels with Basic credentials from the URL, TLS verified end to end, h2 offered', async () => {
    const dispatcher = await through(proxy.url.replace('//', '//us%40er:pa%3Ass@'), {
      http2: true,
    });
    const res = await request(`${standin.url}/v1.0/contracts/`, {
      dispatcher,
      headers: ['x-repeat', 'a', 'x-repeat', 'b'],
    });
    await res.body.dump();
    expect(res.statusCode).toBe(401); // reached the API (no bearer sent)
    expect(proxy.seen).toEqual([
      {
        target: `127.0.0.1:${standin.port}`,
        auth: `Basic ${Buffer.from('us@er:pa:ss').toString('base64')}`,
      },
    ]);
    const seen = standin.apiRequests.at(-1)!;
    expect(seen.httpVersion).toBe('2.0');
    expect(seen.headers['x-repeat']).toBe('a, b'); // both values of the repeated name arrived
  });

  it('keeps the pool limit per origin through the tunnel', async () => {
    const dispatcher = await through(proxy.url, { connections: 2 });
    const answers = await statusesOfGets(`${standin.url}/v1.0/contracts/`, dispatcher);
    expect(answers.every((status) => status === 401)).toBe(true);
    expect(proxy.seen.length).toBeLessThanOrEqual(2);
  });

  it('holds the pool limit through the tunnel when tunnels fail while requests wait', async () => {
    // An origin that keeps every connection open: a tunnel closes only when the sidecar closes it.
    const pki = await createTestPki();
    const origin = createHttpsServer({ cert: pki.serverCert, key: pki.serverKey }, (_req, res) =>
      res.end('ok'),
    );
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const url = `https://127.0.0.1:${(origin.address() as { port: number }).port}`;
    const dispatcher = await createDispatcher({
      ca: trustContext(pki.caCert),
      http2: false,
      connections: 2,
      origin: url,
      proxy: proxy.url,
    });
    dispatchers.push(dispatcher);
    proxy.resets = 2;
    // Counted where the sockets are (undici's diagnostics channel): the proxy would see a tunnel's
    // close later than the sidecar, which may dial the next one meanwhile.
    let open = 0;
    let maxOpen = 0;
    const onConnected = (message: unknown): void => {
      const { connectParams, socket } = message as {
        connectParams: { port: string };
        socket: Socket;
      };
      // The origin's connections (inside tunnels), not the ones to the proxy that carry them.
      if (String(connectParams.port) !== new URL(url).port) return;
      open += 1;
      maxOpen = Math.max(maxOpen, open);
      socket.once('close', () => (open -= 1));
    };
    diagnostics.subscribe('undici:client:connected', onConnected);
    try {
      expect(await getsAcrossAFailure(`${url}/`, dispatcher)).toBeGreaterThan(0);
      expect(maxOpen).toBeLessThanOrEqual(2);
    } finally {
      diagnostics.unsubscribe('undici:client:connected', onConnected);
      await dispatcher.destroy();
      origin.closeAllConnections();
      origin.close();
    }
  });

  it.each([407, 403, 502])('names the proxy and its %i answer to CONNECT', async (status) => {
    proxy.answer = status;
    const dispatcher = await through(proxy.url.replace('//', '//user:hidden-pw@'));
    const error = await request(`${standin.url}/v1.0/contracts/`, { dispatcher }).catch(
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(EgressProxyError);
    expect((error as EgressProxyError).status).toBe(status);
    expect((error as Error).message).toContain(
      `egress proxy http://***@127.0.0.1:${new URL(proxy.url).port} answered CONNECT 127.0.0.1:${standin.port} with ${status}`,
    );
    expect((error as Error).message).not.toContain('hidden-pw');
  });

  it('names an unreachable proxy', async () => {
    const dispatcher = await through('http://127.0.0.1:1');
    const error = await request(`${standin.url}/v1.0/contracts/`, { dispatcher }).catch(
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(EgressProxyError);
    expect((error as Error).message).toContain(
      'egress proxy http://127.0.0.1:1 unreachable (ECONNREFUSED)',
    );
  });

  it("keeps undici's error type for an https proxy whose certificate names another host", async () => {
    // The test certificate names localhost, 127.0.0.1 and ::1; the proxy is reached as 127.0.0.2.
    const pki = await createTestPki();
    const tlsProxy = createHttpsServer({ cert: pki.serverCert, key: pki.serverKey });
    await new Promise<void>((resolve) => tlsProxy.listen(0, '127.0.0.2', resolve));
    try {
      const { port } = tlsProxy.address() as { port: number };
      const dispatcher = createEgressDispatcher({
        proxy: `https://127.0.0.2:${port}`,
        secureContext: trustContext(pki.caCert),
        http2: false,
        connections: null,
        keepAliveTimeout: 1_000,
      });
      dispatchers.push(dispatcher);
      const error = await request(`${standin.url}/v1.0/contracts/`, { dispatcher }).catch(
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(undici.errors.SecureProxyConnectionError);
      expect((error as Error).cause).toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
    } finally {
      tlsProxy.closeAllConnections();
      await new Promise((resolve) => tlsProxy.close(resolve));
    }
  });
});
