// Peer for the bench: Hono's proxy() helper (fetch-based) on @hono/node-server, adding a static
// bearer, as its documentation shows. Env: PORT, UPSTREAM (https origin); the CA comes in through
// NODE_EXTRA_CA_CERTS because the helper uses the global fetch.
import process from 'node:process';
import { URL } from 'node:url';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { proxy } from 'hono/proxy';

const upstream = process.env.UPSTREAM;
const app = new Hono();
app.all('/v1.0/*', (c) => {
  const url = new URL(c.req.url);
  return proxy(`${upstream}${url.pathname}${url.search}`, {
    ...c.req,
    headers: { ...c.req.header(), host: undefined, authorization: 'Bearer bench-static-token' },
  });
});
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: '127.0.0.1' });
