import { generate } from 'selfsigned';
import type { TestPki } from './types.js';

const DAY_MS = 24 * 60 * 60 * 1000;
/** Backdated a little so a peer whose clock lags by a minute still accepts the certificates. */
const CLOCK_SKEW_MS = 5 * 60 * 1000;

/**
 * A throwaway CA and a server certificate it signed for `localhost`, 127.0.0.1 and ::1.
 * EC P-256 with SHA-256: generated in milliseconds, so every test file can have its own.
 * Valid for a day; nothing is written to disk.
 */
export async function createTestPki(): Promise<TestPki> {
  const notBeforeDate = new Date(Date.now() - CLOCK_SKEW_MS);
  const notAfterDate = new Date(Date.now() + DAY_MS);
  const common = {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
  } as const;

  const ca = await generate([{ name: 'commonName', value: 'oauth-sidecar stand-in CA' }], {
    ...common,
    extensions: [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      {
        name: 'keyUsage',
        keyCertSign: true,
        cRLSign: true,
        digitalSignature: true,
        critical: true,
      },
    ],
  });

  const server = await generate([{ name: 'commonName', value: 'localhost' }], {
    ...common,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });

  return { caCert: ca.cert, serverCert: server.cert, serverKey: server.private };
}
