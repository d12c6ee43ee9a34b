/**
 * What the response cache costs a real sidecar process (the bundle, with the image's heap
 * settings) under a flood meant to grow it: distinct keys, and `Vary` variants carrying 12 KB
 * request values. Its resident memory may grow by at most `cache.maxBytes` + 10 % + a slack
 * (DESIGN "Response cache": everything an entry holds is counted), and it stays alive.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Pool, request, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, startStandin, type Standin } from '../src/standin/index.js';
import { startSidecarProcess, waitReady, writeTemp } from './helpers/sidecar-process.js';

/** The image's heap settings (Dockerfile NODE_OPTIONS). */
const IMAGE_NODE_OPTIONS = '--max-old-space-size=160 --max-semi-space-size=2';
const MiB = 1024 * 1024;

let standin: Standin;
let origin: Server;
let originUrl: string;
let caFile: string;

beforeAll(async () => {
  const pki = await createTestPki();
  standin = await startStandin({ pki, clientId: 'mem-client', clientSecret: 'mem-secret' });
  caFile = writeTemp('ca.pem', pki.caCert);
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
  originUrl = `https://127.0.0.1:${(origin.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => origin?.close(resolve));
  await standin?.close();
});

function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match![1]) * 1024;
}

/** `count` GETs through `pool`, 32 at a time; each must answer 200. */
async function flood(pool: Pool, count: number, options: (i: number) => Dispatcher.RequestOptions) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const res = await pool.request(options(next++));
      await res.body.dump();
      expect(res.statusCode).toBe(200);
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
}

async function measure(
  env: Record<string, string>,
  maxBytes: number,
  count: number,
  options: (i: number) => Dispatcher.RequestOptions,
  slack = 30 * MiB,
) {
  const sidecar = await startSidecarProcess({
    UPSTREAM_BASE_URL: originUrl,
    TOKEN_URL: `${standin.url}/oauth/token/`,
    UPSTREAM_CA_FILE: caFile,
    CLIENT_ID: 'mem-client',
    CLIENT_SECRET: 'mem-secret',
    NODE_OPTIONS: IMAGE_NODE_OPTIONS,
    CACHE_RULES: '/v1.0/=300',
    ...env,
  });
  const pool = new Pool(sidecar.proxyUrl, { connections: 32 });
  try {
    await waitReady(sidecar);
    // Warm: the connections, the code paths and the first entries exist before the baseline.
    await flood(pool, 500, (i) => options(count + i));
    const before = rssBytes(sidecar.child.pid!);
    await flood(pool, count, options);
    const growth = rssBytes(sidecar.child.pid!) - before;
    const status = (await (await request(`${sidecar.adminUrl}/status`)).body.json()) as {
      cache: { entries: number; bytes: number };
    };
    expect(sidecar.child.exitCode).toBeNull(); // alive under the heap cap
    console.log(
      `cache flood: RSS +${Math.round(growth / MiB)} MiB, ${JSON.stringify(status.cache)}`,
    );
    return { growth, status, bound: maxBytes * 1.1 + slack };
  } finally {
    await pool.close();
    await sidecar.stop();
  }
}

describe('response cache memory under a flood (bundle, image heap settings)', () => {
  it('20,000 distinct keys: at most cache.maxEntries held, RSS within maxBytes + 10 % + 30 MiB', async () => {
    const { growth, status, bound } = await measure({}, 64 * MiB, 20_000, (i) => ({
      path: `/v1.0/contracts/?page=${i}`,
      method: 'GET',
    }));
    expect(status.cache.entries).toBeLessThanOrEqual(10_000);
    expect(growth, `RSS grew ${Math.round(growth / MiB)} MiB`).toBeLessThanOrEqual(bound);
  }, 120_000);

  it('3,000 Vary variants of 12 KB each in a 4 MiB cache: the values count, RSS stays bounded', async () => {
    const pad = (i: number) => `${i}-${'p'.repeat(12 * 1024)}`;
    // On Node 24 the flood's own 36 MB of header values leave 21–35 MiB in RSS (it does not fall
    // back when idle), so RSS alone cannot tell counted values from uncounted ones (those read
    // +40 MiB on Node 20): the cache's own count decides, RSS only bounds a gross leak.
    const { growth, status, bound } = await measure(
      { CACHE_MAX_BYTES: String(4 * MiB) },
      4 * MiB,
      3_000,
      (i) => ({
        path: `/v1.0/items/?vary=1&k=${i % 300}`,
        method: 'GET',
        headers: { 'x-pad': pad(i) },
      }),
      45 * MiB,
    );
    expect(status.cache.bytes).toBeLessThanOrEqual(4 * MiB);
    // Each held variant carries its 12 KB value: a 4 MiB cache holds a few hundred of them
    // (uncounted, all 3,000 would be held).
    expect(status.cache.entries).toBeLessThan(400);
    expect(growth, `RSS grew ${Math.round(growth / MiB)} MiB`).toBeLessThanOrEqual(bound);
  }, 120_000);
});
