// The container image's runtime settings, read from the Dockerfile: what ships. The bench, the
// module-cost script and the tests whose figures are about memory under load run node with them.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const DOCKERFILE = readFileSync(join(import.meta.dirname, '..', 'Dockerfile'), 'utf8');

/** A variable the Dockerfile sets (NODE_OPTIONS, GLIBC_TUNABLES); '' when it sets none. */
export function dockerEnv(name) {
  return new RegExp(`^\\s*(?:ENV\\s+)?${name}="([^"]*)"`, 'm').exec(DOCKERFILE)?.[1] ?? '';
}

/**
 * The node flags of the Dockerfile's ENTRYPOINT (`["node", <flags>, "dist/main.js"]`): V8 flags
 * NODE_OPTIONS may not carry (`--heap-growing-percent`).
 */
export function dockerEntrypointFlags() {
  const entrypoint = /^ENTRYPOINT (\[.*\])\s*$/m.exec(DOCKERFILE)?.[1];
  return entrypoint === undefined ? [] : JSON.parse(entrypoint).slice(1, -1);
}

/** The environment the image sets for node (only the variables it sets). */
export function shippedEnv() {
  const env = {};
  for (const name of ['NODE_OPTIONS', 'GLIBC_TUNABLES']) {
    const value = dockerEnv(name);
    if (value !== '') env[name] = value;
  }
  return env;
}
