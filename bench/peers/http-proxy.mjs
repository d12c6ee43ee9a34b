// Peer for the bench: node:http + http-proxy 1.18 with a keep-alive agent, adding a static bearer.
// Env: PORT, UPSTREAM (https origin), CA_FILE.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { Agent } from 'node:https';
import process from 'node:process';
import httpProxy from 'http-proxy';

const ca = readFileSync(process.env.CA_FILE, 'utf8');
const agent = new Agent({ keepAlive: true, maxSockets: 256, ca });
// The bearer goes in through `headers`, merged before the request is made: setting it in the
// `proxyReq` event threw ERR_HTTP_HEADERS_SENT once in a 40-minute run (the event fires on the
// socket, after a bodiless request on a reused keep-alive socket may already be flushed), which
// killed the peer and the run.
const proxy = httpProxy.createProxyServer({
  target: process.env.UPSTREAM,
  agent,
  ca,
  secure: true,
  changeOrigin: true,
  headers: { authorization: 'Bearer bench-static-token' },
});
// A client that leaves mid-answer (wrk stopping with 50 answers of 1 MiB in flight) leaves
// http-proxy's upstream response paused in its pipe, holding a keep-alive socket for good; after
// five rounds of the bench the agent's 256 sockets were all held and the peer stopped answering
// (rounds 6-8 of two 8-round runs). Destroying the upstream response frees its socket.
proxy.on('proxyRes', (proxyRes, _req, res) => {
  res.on('close', () => {
    if (!res.writableFinished) proxyRes.destroy();
  });
});
proxy.on('error', (_err, _req, res) => {
  if (typeof res.writeHead === 'function' && !res.headersSent) res.writeHead(502);
  res.end();
});
createServer((req, res) => {
  if (!req.url.startsWith('/v1.0/')) {
    res.writeHead(404).end();
    return;
  }
  proxy.web(req, res);
}).listen(Number(process.env.PORT), '127.0.0.1');
