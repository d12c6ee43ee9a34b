/**
 * The response cache of a real sidecar process (the bundle, with the image's heap settings) under
 * floods meant to grow it: distinct keys, and `Vary` variants carrying 12 KB request values. The
 * cache is made small (`cache.maxEntries` 50, `cache.maxBytes` 256 KiB) so that floods of a few
 * hundred requests overrun each limit several times: it holds no more than either allows,
 * counting everything an entry holds (DESIGN "Response cache"), and the process stays alive.
 * What the process's memory does under floods of 20,000 into the default cache is a figure of
 * bench/hostile-load.mjs (`--only=cache`); what one entry really holds, of bench/cache-memory.mjs.
 */
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Pool, request, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, startStandin, type Standin } from '../src/standin/index.js';
import {
  startSidecarProcess,
  waitReady,
  writeTemp,
  type SidecarProcess,
} from './helpers/sidecar-process.js';

/** The image's heap settings (Dockerfile NODE_OPTIONS). */
const IMAGE_NODE_OPTIONS = '--max-old-space-size=160 --max-semi-space-size=2';
const MAX_ENTRIES = 50;
const MAX_BYTES = 256 * 1024;
const PAD_BYTES = 12 * 1024;

let standin: Standin;
let origin: Server;
let sidecar: SidecarProcess | undefined;
let pool: Pool | undefined;

beforeAll(async () => {
  const pki = await createTestPki();
  standin = await startStandin({ pki, clientId: 'mem-client', clientSecret: 'mem-secret' });
  const caFile = writeTemp('ca.pem', pki.caCert);
  // Small JSON answers; `?vary=1` answers `Vary: X-Pad`.
  origin = createServer({ key: pki.serverKey, cert: pki.serverCert }, (req, res) => {
    const vary = (req.url ?? '').includes('vary=1');
    const body = JSON.stringify({ url: req.url, data: 'x'.repeat(200) });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...(vary ? { vary: 'X-Pad' } : {}),
    });
    res.end(body);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  sidecar = await startSidecarProcess({
    UPSTREAM_BASE_URL: `https://127.0.0.1:${(origin.address() as AddressInfo).port}`,
    TOKEN_URL: `${standin.url}/oauth/token/`,
    UPSTREAM_CA_FILE: caFile,
    CLIENT_ID: 'mem-client',
    CLIENT_SECRET: 'mem-secret',
    NODE_OPTIONS: IMAGE_NODE_OPTIONS,
    CACHE_RULES: '/v1.0/=300',
    CACHE_MAX_ENTRIES: String(MAX_ENTRIES),
    CACHE_MAX_BYTES: String(MAX_BYTES),
    // At most cache.maxBytes; the answers are about 250 bytes.
    CACHE_MAX_ENTRY_BYTES: String(64 * 1024),
  });
  await waitReady(sidecar);
  pool = new Pool(sidecar.proxyUrl, { connections: 8 });
});

afterAll(async () => {
  await pool?.close();
  await sidecar?.stop();
  await new Promise((resolve) => origin?.close(resolve));
  await standin?.close();
});

/** `count` GETs through the sidecar, 8 at a time; each must answer 200. Then its cache's count. */
async function flood(count: number, options: (i: number) => Dispatcher.RequestOptions) {
  const s = sidecar!;
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const res = await pool!.request(options(next++));
      await res.body.dump();
      expect(res.statusCode).toBe(200);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  expect(s.child.exitCode).toBeNull(); // alive under the heap cap
  const status = (await (await request(`${s.adminUrl}/status`)).body.json()) as {
    cache: { entries: number; bytes: number };
  };
  return status.cache;
}

describe('response cache limits under a flood (bundle, image heap settings)', () => {
  it('250 distinct keys: at most cache.maxEntries (50) held', async () => {
    const cache = await flood(250, (i) => ({
      path: `/v1.0/contracts/?page=${i}`,
      method: 'GET',
    }));
    // 50 small entries count about 63 KB: the entry limit binds, not the bytes.
    expect(cache.entries).toBeGreaterThan(0);
    expect(cache.entries).toBeLessThanOrEqual(MAX_ENTRIES);
    expect(cache.bytes).toBeLessThanOrEqual(MAX_BYTES);
  });

  it('200 Vary variants of 12 KB each in a 256 KiB cache: the values count', async () => {
    const pad = (i: number) => `${i}-${'p'.repeat(PAD_BYTES)}`;
    // 2.4 MB of request values, nine times the cache: 10 variants of each of 20 paths (8 kept
    // per path at most).
    const cache = await flood(200, (i) => ({
      path: `/v1.0/items/?vary=1&k=${i % 20}`,
      method: 'GET',
      headers: { 'x-pad': pad(i) },
    }));
    expect(cache.bytes).toBeLessThanOrEqual(MAX_BYTES);
    // Each held variant carries its 12 KB value: 256 KiB holds at most 21 of them (uncounted,
    // the entry limit's 50 would be held).
    expect(cache.entries).toBeGreaterThan(0);
    expect(cache.entries).toBeLessThanOrEqual(Math.floor(MAX_BYTES / PAD_BYTES));
  });
});
