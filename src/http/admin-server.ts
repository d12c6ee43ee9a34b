import { createAdaptorServer } from '@hono/node-server';
import type { Hono } from 'hono';
import type { HostPort } from '../config/types.js';
import { listen } from './listen.js';

export interface AdminServer {
  address: HostPort;
  close(): Promise<void>;
}

/** Listen with the admin app. Rejects with a ListenError naming ADMIN_LISTEN. */
export async function startAdminServer(options: {
  app: Hono;
  listen: HostPort;
}): Promise<AdminServer> {
  const server = createAdaptorServer({ fetch: options.app.fetch });
  const address = await listen(server, options.listen, {
    env: 'ADMIN_LISTEN',
    key: 'admin.listen',
  });
  return {
    address,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Scrapers hold keep-alive connections open; they must not delay the exit.
        if ('closeAllConnections' in server) server.closeAllConnections();
      }),
  };
}
