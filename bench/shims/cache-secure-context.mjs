// Measurement aid, not product code: `--sidecar-flags="--import ./bench/shims/cache-secure-context.mjs"`
// makes every TLS connection reuse one SecureContext for the big CA list the upstream dispatcher
// passes (system roots + UPSTREAM_CA_FILE), to show what building it once in
// src/proxy/dispatcher.ts would save. Building it costs ~50 ms (Node 20) / ~14 ms (Node 24) of
// blocked event loop per new upstream connection.
import tls from 'node:tls';

const original = tls.createSecureContext;
let shared;
tls.createSecureContext = (options) => {
  if (
    options &&
    Array.isArray(options.ca) &&
    options.ca.length > 100 &&
    !options.cert &&
    !options.key
  ) {
    return (shared ??= original(options));
  }
  return original(options);
};
