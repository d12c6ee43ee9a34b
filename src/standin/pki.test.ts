import { X509Certificate } from 'node:crypto';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { startCountingUpstream } from '../../test/helpers/upstream.js';
import { createTestPki } from './pki.js';

describe('createTestPki', () => {
  it('a CA and a server certificate it signed, for localhost, 127.0.0.1 and ::1', async () => {
    const pki = await createTestPki();
    const ca = new X509Certificate(pki.caCert);
    const server = new X509Certificate(pki.serverCert);
    expect(ca.ca).toBe(true);
    expect(server.ca).toBe(false);
    expect(server.verify(ca.publicKey)).toBe(true);
    expect(server.checkIssued(ca)).toBe(true);
    expect(server.subjectAltName).toBe(
      'DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1',
    );
    expect(server.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const notBefore = Date.parse(server.validFrom);
    const notAfter = Date.parse(server.validTo);
    // Backdated for a peer whose clock lags, valid for about a day.
    expect(notBefore).toBeLessThan(Date.now() - 60_000);
    expect(notAfter - notBefore).toBeLessThanOrEqual(24 * 3_600_000 + 5 * 60_000 + 1_000);
    expect(notAfter).toBeGreaterThan(Date.now() + 23 * 3_600_000);
  });

  it('each call is a new CA, and TLS trusts its server under its own CA only', async () => {
    const [pki, other] = await Promise.all([createTestPki(), createTestPki()]);
    expect(other.caCert).not.toBe(pki.caCert);
    const upstream = await startCountingUpstream(pki, (_req, res, done) => {
      res.end('ok');
      done();
    });
    const trusting = new Agent({ connect: { ca: pki.caCert } });
    const stranger = new Agent({ connect: { ca: other.caCert } });
    try {
      const res = await request(upstream.url, { dispatcher: trusting });
      expect(await res.body.text()).toBe('ok');
      const byName = await request(upstream.url.replace('127.0.0.1', 'localhost'), {
        dispatcher: trusting,
      });
      expect(byName.statusCode).toBe(200);
      await byName.body.dump();
      await expect(request(upstream.url, { dispatcher: stranger })).rejects.toThrow(
        /self[- ]signed|unable to verify|certificate/i,
      );
    } finally {
      await Promise.all([trusting.close(), stranger.close(), upstream.close()]);
    }
  });
});
