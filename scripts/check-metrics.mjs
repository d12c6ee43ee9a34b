#!/usr/bin/env node
// Lints the sidecar's own /metrics exposition with `promtool check metrics` (CI; needs the
// prometheus apt package and `npm run build`). prom-client's default nodejs_active_*_total gauges
// always fail promtool's counter-suffix rule, so only the project's own families are linted.
import { spawnSync } from 'node:child_process';
import { startSidecar } from '../dist/sidecar.js';
import { loadConfig } from '../dist/config/load.js';
import { startStandin } from '../dist/standin/index.js';
import { createLogger } from '../dist/telemetry/logger.js';

const OWN = [
  'token_age_seconds',
  'token_expires_in_seconds',
  'token_ready',
  'token_requests_total',
  'token_request_duration_seconds',
  'upstream_requests_total',
  'upstream_request_duration_seconds',
  'upstream_unauthorized_total',
  'proxy_rejected_total',
  'requests_in_flight',
  'upstream_cooldown_seconds',
  'rate_limit_wait_seconds',
].map((n) => `oauth_sidecar_${n}`);

const standin = await startStandin();
const config = await loadConfig({
  env: {
    UPSTREAM_BASE_URL: standin.url,
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: 'demo-secret',
    PROXY_LISTEN: '127.0.0.1:0',
    ADMIN_LISTEN: '127.0.0.1:0',
    LOG_LEVEL: 'warn',
  },
});
const sidecar = await startSidecar(config, {
  logger: createLogger({ level: 'warn' }),
  extraCaPem: standin.caCert,
});
let code = 1;
try {
  await sidecar.keeper.whenReady();
  const proxy = `http://127.0.0.1:${sidecar.proxyAddress.port}`;
  // Touch every labelled family so each has samples.
  await (await fetch(`${proxy}/v1.0/contracts/`)).text();
  await (await fetch(`${proxy}/elsewhere`)).text();
  standin.revokeAccessTokens();
  await (await fetch(`${proxy}/v1.0/contracts/`)).text();
  const text = await (await fetch(`http://127.0.0.1:${sidecar.adminAddress.port}/metrics`)).text();
  const own = text
    .split('\n')
    .filter((line) => {
      const name = line.startsWith('#') ? line.split(' ')[2] : line.split(/[{ ]/)[0];
      return OWN.some((n) => name === n || name?.startsWith(`${n}_`));
    })
    .join('\n');
  const missing = OWN.filter((n) => !own.includes(`# TYPE ${n} `));
  if (missing.length > 0) {
    console.error(`metrics missing from /metrics: ${missing.join(', ')}`);
  } else {
    const result = spawnSync('promtool', ['check', 'metrics'], {
      input: `${own}\n`,
      encoding: 'utf8',
    });
    process.stdout.write(result.stdout);
    process.stderr.write(result.stderr);
    code = result.status ?? 1;
    if (code === 0) console.log(`promtool check metrics: ${OWN.length} families OK`);
  }
} finally {
  await sidecar.shutdown();
  await standin.close();
}
process.exit(code);
