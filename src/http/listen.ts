import type { AddressInfo, Server } from 'node:net';
import type { HostPort } from '../config/types.js';
import { ListenError } from '../errors.js';

/**
 * Listen on `address`; resolve with the bound host and port. A bind failure (EADDRINUSE, EACCES)
 * rejects with a {@link ListenError} naming `setting`, the variable the operator changes.
 */
export async function listen(
  server: Server,
  address: HostPort,
  setting: { env: string; key: string },
): Promise<HostPort> {
  await new Promise<void>((resolve, reject) => {
    const fail = (error: unknown): void => {
      const host = address.host.includes(':') ? `[${address.host}]` : address.host;
      reject(new ListenError(setting, `${host}:${address.port}`, error));
    };
    server.once('error', fail);
    server.listen(address.port, address.host, () => {
      server.off('error', fail);
      resolve();
    });
  });
  const info = server.address() as AddressInfo;
  return { host: info.address, port: info.port };
}
