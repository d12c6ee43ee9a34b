// Peer for the bench: the engine alone — node:http + one undici Pool `stream()` straight into the
// node response, a static bearer, nothing else (no log, metrics, checks). The floor of what the
// sidecar's engine costs per request. Env: PORT, UPSTREAM (https origin), CA_FILE.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import process from 'node:process';
import { Pool } from 'undici';

const ca = readFileSync(process.env.CA_FILE, 'utf8');
const upstream = new URL(process.env.UPSTREAM);
const pool = new Pool(upstream.origin, { connections: 64, connect: { ca } });
createServer((req, res) => {
  const headers = { authorization: 'Bearer bench-static-token', host: upstream.host };
  pool
    .stream({ path: req.url, method: req.method, headers }, ({ statusCode, headers: h }) => {
      res.writeHead(statusCode, h);
      return res;
    })
    .catch(() => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
}).listen(Number(process.env.PORT), '127.0.0.1');
// A normal exit on SIGTERM, so `--cpu-prof` writes its profile.
process.on('SIGTERM', () => process.exit(0));
