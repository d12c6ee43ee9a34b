import { Hono } from 'hono';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { ListenError } from '../errors.js';
import { startAdminServer } from './admin-server.js';

describe('startAdminServer', () => {
  it('serves the app, and closes while a scraper holds a keep-alive connection', async () => {
    const app = new Hono().get('/healthz', (c) => c.text('ok'));
    const admin = await startAdminServer({ app, listen: { host: '127.0.0.1', port: 0 } });
    const keepAlive = new Agent({ keepAliveTimeout: 60_000 });
    try {
      const url = `http://127.0.0.1:${admin.address.port}/healthz`;
      const res = await request(url, { dispatcher: keepAlive });
      expect(res.statusCode).toBe(200);
      expect(await res.body.text()).toBe('ok');
      // The agent keeps its connection; close() still resolves (closeAllConnections).
      await admin.close();
      await expect(request(url, { dispatcher: new Agent() })).rejects.toThrow(/ECONNREFUSED/);
    } finally {
      await keepAlive.destroy();
    }
  });

  it('rejects a taken address with a ListenError naming ADMIN_LISTEN', async () => {
    const app = new Hono();
    const first = await startAdminServer({ app, listen: { host: '127.0.0.1', port: 0 } });
    try {
      const error = await startAdminServer({ app, listen: first.address }).catch(
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(ListenError);
      expect((error as Error).message).toContain('ADMIN_LISTEN (admin.listen)');
    } finally {
      await first.close();
    }
  });
});
