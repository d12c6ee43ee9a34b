import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import type { Hono } from 'hono';
import type { HostPort } from '../config/types.js';

export interface AdminServer {
  address: HostPort;
  close(): Promise<void>;
}

/** Listen with the admin app. Rejects with the listen error (EADDRINUSE, EACCES) as it is. */
export async function startAdminServer(options: {
  app: Hono;
  listen: HostPort;
}): Promise<AdminServer> {
  const server = createAdaptorServer({ fetch: options.app.fetch });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listen.port, options.listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const info = server.address() as AddressInfo;
  return {
    address: { host: info.address, port: info.port },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Scrapers hold keep-alive connections open; they must not delay the exit.
        if ('closeAllConnections' in server) server.closeAllConnections();
      }),
  };
}
