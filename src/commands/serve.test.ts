import { createServer, type Server } from 'node:net';
import { rmSync } from 'node:fs';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeTemp } from '../../test/helpers/sidecar-process.js';
import { loadConfig } from '../config/load.js';
import type { Config } from '../config/types.js';
import { startStandin, type Standin } from '../standin/index.js';
import { runServe, type LogSink } from './serve.js';

const SECRET = 'serve-secret-61fd';
let standin: Standin;
let caFile: string;

beforeAll(async () => {
  standin = await startStandin({ clientId: 'serve-client', clientSecret: SECRET });
  caFile = writeTemp('serve-ca.pem', standin.caCert);
});
afterAll(() => standin.close());

function config(env: Record<string, string> = {}): Promise<Config> {
  return loadConfig({
    env: {
      UPSTREAM_BASE_URL: standin.url,
      UPSTREAM_CA_FILE: caFile,
      CLIENT_ID: 'serve-client',
      CLIENT_SECRET: SECRET,
      PROXY_LISTEN: '127.0.0.1:0',
      ADMIN_LISTEN: '127.0.0.1:0',
      ...env,
    },
  });
}

function capture(): {
  sink: LogSink;
  lines: string[];
  err: string[];
  io: { out(l: string): void; err(l: string): void };
} {
  const lines: string[] = [];
  const err: string[] = [];
  return {
    sink: { write: (line: string) => lines.push(line), flushSync: () => undefined },
    lines,
    err,
    io: { out: () => undefined, err: (line) => void err.push(line) },
  };
}

describe('runServe', () => {
  it('serves the proxy on the configured address and logs no secret or token', async () => {
    const { sink, lines, io } = capture();
    const serving = await runServe(await config({ LOG_LEVEL: 'debug' }), io, sink);
    if (typeof serving === 'number') throw new Error(`exit ${serving}`);
    try {
      const { host, port } = serving.sidecar.proxyAddress;
      const res = await request(`http://${host}:${port}/v1.0/contracts/`);
      expect(res.statusCode).toBe(200);
      await res.body.dump();
    } finally {
      await serving.sidecar.shutdown();
    }
    serving.sidecar.flush();
    expect(lines.length).toBeGreaterThan(0);
    const log = lines.join('');
    for (const secret of [SECRET, ...standin.issuedTokens()]) expect(log).not.toContain(secret);
  });

  it('an address in use is one fatal line naming the setting, and exit 1', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as { port: number };
    const { sink, lines, err, io } = capture();
    try {
      const code = await runServe(await config({ PROXY_LISTEN: `127.0.0.1:${port}` }), io, sink);
      expect(code).toBe(1);
    } finally {
      taken.close();
    }
    expect(err).toEqual([]);
    const fatal = lines.map((line) => JSON.parse(line) as Record<string, unknown>).at(-1);
    expect(fatal).toMatchObject({
      event: 'listen',
      setting: 'PROXY_LISTEN',
      address: `127.0.0.1:${port}`,
      msg: expect.stringMatching(/^cannot start: /),
    });
    expect(fatal).not.toHaveProperty('err');
  });

  it('any other failure to start is a line on stderr and exit 1', async () => {
    const gone = writeTemp('gone-ca.pem', standin.caCert);
    const loaded = await config({ UPSTREAM_CA_FILE: gone });
    rmSync(gone);
    const { sink, lines, err, io } = capture();
    expect(await runServe(loaded, io, sink)).toBe(1);
    expect(err).toEqual([expect.stringMatching(/^oauth-sidecar: cannot start: .*ENOENT/)]);
    expect(lines.join('')).toContain('"msg":"cannot start"');
  });
});
