import { afterAll, beforeAll, expect, it } from 'vitest';
import { Agent, request } from 'undici';
import { startStandin, type Standin } from '../src/standin/index.js';
import { startStack, type Stack } from './proxy-stack.js';

let standin: Standin;
let stack: Stack;
const client = new Agent();

beforeAll(async () => {
  standin = await startStandin();
  stack = await startStack(standin);
});

afterAll(async () => {
  await client.close();
  await stack.close();
  await standin.close();
});

it('streams a 200 MB download with flat memory (backpressure, no buffering)', async () => {
  const size = 200 * 1024 * 1024;
  const start = process.memoryUsage.rss();
  let peak = start;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 50);
  try {
    const res = await request(`${stack.url}/v1.0/bytes/${size}`, { dispatcher: client });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe(String(size));
    let received = 0;
    for await (const chunk of res.body) received += (chunk as Buffer).length;
    expect(received).toBe(size);
  } finally {
    clearInterval(sampler);
  }
  // Stand-in, proxy and client share this process; buffering the body anywhere would add 200 MB.
  expect(peak - start).toBeLessThan(100 * 1024 * 1024);
}, 120_000);
