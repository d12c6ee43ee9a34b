import type { AddressInfo, Server } from 'node:net';
import type { HostPort } from '../config/types.js';

/** Listen on `address`; resolve with the bound host and port, or reject with the listen error as it is. */
export async function listen(server: Server, address: HostPort): Promise<HostPort> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const info = server.address() as AddressInfo;
  return { host: info.address, port: info.port };
}
