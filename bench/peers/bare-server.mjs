// The footprint floor (docs/benchmarks.md "Footprint"): a bare node:http server that also loads
// node:tls and node:http2, the modules any HTTPS client with h2 support brings in (undici and
// @hono/node-server import both). Run on the shipped runtime beside the sidecar's idle figure.
import { createServer } from 'node:http';
import 'node:http2';
import 'node:tls';

const server = createServer((_req, res) => res.end('ok'));
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
