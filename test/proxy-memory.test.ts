/**
 * A 200 MB download through a real sidecar process, with the client pausing mid-body: the
 * sidecar's own RSS (read from /proc, so the stand-in and the client in this process do not count)
 * must stay flat. Buffering instead of respecting backpressure would add up to 200 MB.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { request } from 'undici';
import { startStandin, type Standin } from '../src/standin/index.js';
import {
  startSidecarProcess,
  waitReady,
  writeTemp,
  type SidecarProcess,
} from './helpers/sidecar-process.js';
import { realClock } from './helpers/wait.js';

const stall = realClock(
  'a client that stops reading for 2 s while the sidecar process streams to it',
);

let standin: Standin;
let sidecar: SidecarProcess;

function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? NaN) * 1024;
}

beforeAll(async () => {
  standin = await startStandin();
  sidecar = await startSidecarProcess({
    UPSTREAM_BASE_URL: standin.url,
    UPSTREAM_CA_FILE: writeTemp('ca.pem', standin.caCert),
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: 'demo-secret',
  });
  await waitReady(sidecar);
});

afterAll(async () => {
  await sidecar?.stop();
  await standin?.close();
});

it('streams a 200 MB download with flat sidecar memory while the client pauses (backpressure)', async () => {
  const pid = sidecar.child.pid!;
  // Warm up: JIT, TLS session and the keep-alive pool exist before the baseline is taken.
  for (let i = 0; i < 3; i++) {
    const warm = await request(`${sidecar.proxyUrl}/v1.0/bytes/${4 * 1024 * 1024}`);
    await warm.body.arrayBuffer();
  }
  const start = rssBytes(pid);
  let peak = start;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssBytes(pid));
  }, 20);
  const size = 200 * 1024 * 1024;
  try {
    const res = await request(`${sidecar.proxyUrl}/v1.0/bytes/${size}`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe(String(size));
    let received = 0;
    let paused = false;
    for await (const chunk of res.body) {
      received += (chunk as Buffer).length;
      if (!paused && received > 8 * 1024 * 1024) {
        paused = true;
        await stall.sleep(2000); // the upstream must be held back, not buffered
      }
    }
    expect(received).toBe(size);
  } finally {
    clearInterval(sampler);
  }
  // Measured growth: ~20 MiB on Node 20, ~60 MiB on Node 24 (lazier GC). Ignoring backpressure
  // would pile up the whole 200 MB during the 2 s pause.
  expect(peak - start).toBeLessThan(120 * 1024 * 1024);
}, 120_000);
