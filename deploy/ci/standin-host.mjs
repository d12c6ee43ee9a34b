// The stand-in commodities API on the host, for deploy/ci/container-proof.sh (after `npm run build`).
// Prints `url=https://127.0.0.1:PORT` once listening, writes its CA certificate to --ca-file, and
// runs until SIGTERM/SIGINT.
//   node deploy/ci/standin-host.mjs --ca-file FILE [--host H] [--port P] [--client-id ID] [--client-secret S]
import { writeFileSync } from 'node:fs';
import process from 'node:process';
import { URL } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    'ca-file': { type: 'string' },
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '0' },
    'client-id': { type: 'string', default: 'proof-client' },
    'client-secret': { type: 'string', default: 'proof-secret' },
  },
});
if (values['ca-file'] === undefined) {
  process.stderr.write('standin-host: --ca-file FILE is required\n');
  process.exit(2);
}

const { startStandin } = await import(new URL('../../dist/standin/index.js', import.meta.url).href);
const standin = await startStandin({
  host: values.host,
  port: Number(values.port),
  clientId: values['client-id'],
  clientSecret: values['client-secret'],
});
writeFileSync(values['ca-file'], standin.caCert);
process.stdout.write(`url=${standin.url}\n`);

const stop = () => {
  const { tokenRequests, apiRequests } = standin;
  process.stdout.write(
    `token requests: ${tokenRequests.length}, api requests: ${apiRequests.length}\n`,
  );
  standin.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
