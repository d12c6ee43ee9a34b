// What undici's cache interceptor (the alternative to src/proxy/cache/) does with the sidecar's
// traffic: every upstream request carries `Authorization`, and the API's answers may carry no
// freshness at all. Prints, per case, how many of two identical GETs reached the origin.
//
//   node bench/undici-cache-probe.mjs
import { createServer } from 'node:http';
import process from 'node:process';
import { Agent, interceptors, request } from 'undici';

const cases = [
  { name: 'no Cache-Control (the operator rule would give the TTL)', cc: undefined, auth: true },
  { name: 'max-age=60, request with Authorization', cc: 'max-age=60', auth: true },
  { name: 'public, max-age=60, request with Authorization', cc: 'public, max-age=60', auth: true },
  { name: 'max-age=60, request without Authorization', cc: 'max-age=60', auth: false },
];

const counts = new Map();
const server = createServer((req, res) => {
  counts.set(req.url, (counts.get(req.url) ?? 0) + 1);
  const cc = new URL(req.url, 'http://x').searchParams.get('cc');
  res.writeHead(200, {
    'content-type': 'application/json',
    ...(cc ? { 'cache-control': cc } : {}),
  });
  res.end('{"data":[]}');
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${server.address().port}`;
const agent = new Agent().compose(interceptors.cache({ type: 'shared' }));

const rows = [];
for (const [i, c] of cases.entries()) {
  const path = `/v1.0/contracts/?case=${i}${c.cc ? `&cc=${encodeURIComponent(c.cc)}` : ''}`;
  for (let n = 0; n < 2; n++) {
    const res = await request(`${origin}${path}`, {
      dispatcher: agent,
      headers: c.auth ? { authorization: 'Bearer abc' } : {},
    });
    await res.body.text();
  }
  rows.push(`| ${c.name} | ${counts.get(path)} of 2 |`);
}
process.stdout.write(
  `undici ${(await import('undici/package.json', { with: { type: 'json' } })).default.version}\n\n` +
    '| answer, request | reached the origin |\n|---|---:|\n' +
    rows.join('\n') +
    '\n',
);
await agent.close();
server.close();
