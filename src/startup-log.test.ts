import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config/load.js';
import { logConfiguration, logListening } from './startup-log.js';
import { createLogger } from './telemetry/logger.js';
import { VERSION } from './version.js';

const ENV = {
  UPSTREAM_BASE_URL: 'https://api.example.com',
  CLIENT_ID: 'the-id',
  CLIENT_SECRET: 'startup-log-secret',
};

/** A logger whose JSON lines land in `lines`. */
function capturing(): {
  lines: Record<string, unknown>[];
  logger: ReturnType<typeof createLogger>;
} {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: createLogger({ level: 'info', destination }) };
}

describe('the start-up lines', () => {
  it('give one warn line per configuration warning, then the features in effect', async () => {
    const config = await loadConfig({ env: ENV });
    const { lines, logger } = capturing();
    logConfiguration(logger, { ...config, warnings: ['first warning', 'second warning'] });
    expect(lines.map((line) => [line.level, line.msg])).toEqual([
      ['warn', 'configuration: first warning'],
      ['warn', 'configuration: second warning'],
      ['info', expect.stringMatching(/^features in effect: /)],
    ]);
    expect(lines[2]!.component).toBe('config');
    expect(lines[2]!.features).toBeDefined();
  });

  it('say where the sidecar listens and what it forwards to, never the secret', async () => {
    const config = await loadConfig({ env: ENV });
    const { lines, logger } = capturing();
    logListening(logger, config, { host: '127.0.0.1', port: 8080 }, { host: '::', port: 9090 });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      msg: 'oauth-sidecar listening',
      proxy: '127.0.0.1:8080',
      admin: ':::9090',
      upstream: 'https://api.example.com',
      prefixes: ['/v1.0/'],
      tokenUrl: config.token.url,
      version: VERSION,
    });
    expect(JSON.stringify(lines)).not.toContain('startup-log-secret');
  });
});
