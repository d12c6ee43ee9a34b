import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { ListenError } from '../errors.js';
import { listen } from './listen.js';

const SETTING = { env: 'PROXY_LISTEN', key: 'proxy.listen' };
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map((s) => new Promise((resolve) => s.close(() => resolve(undefined)))),
  );
});

function server(): Server {
  const made = createServer();
  servers.push(made);
  return made;
}

describe('listen', () => {
  it('resolves with the address the kernel bound, port 0 made concrete', async () => {
    const bound = await listen(server(), { host: '127.0.0.1', port: 0 }, SETTING);
    expect(bound.host).toBe('127.0.0.1');
    expect(bound.port).toBeGreaterThan(0);
  });

  it('rejects a taken port with a ListenError naming the setting to change', async () => {
    const taken = await listen(server(), { host: '127.0.0.1', port: 0 }, SETTING);
    const second = server();
    const error = await listen(second, taken, SETTING).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ListenError);
    expect((error as ListenError).message).toContain(
      `PROXY_LISTEN (proxy.listen) 127.0.0.1:${taken.port}`,
    );
    expect((error as ListenError).message).toContain('set PROXY_LISTEN to a free address');
    expect(((error as ListenError).cause as { code?: string }).code).toBe('EADDRINUSE');
    // The failed listener's error handler is the one-shot one: a later error is not swallowed by it.
    expect(second.listenerCount('error')).toBe(0);
  });

  it('brackets an IPv6 host in the address it names', async () => {
    const error = await listen(server(), { host: '::ffff:0:1', port: 1 }, SETTING).catch(
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(ListenError);
    expect((error as ListenError).message).toContain('[::ffff:0:1]:1');
  });
});
