/**
 * The container image's runtime settings, read from the Dockerfile: `NODE_OPTIONS` (the heap
 * caps), `GLIBC_TUNABLES` and the ENTRYPOINT's node flags. Tests whose figures are about memory
 * under load run the bundle with them, as the image does.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const DOCKERFILE = readFileSync(join(import.meta.dirname, '..', '..', 'Dockerfile'), 'utf8');
const GLIBC_TUNABLES = /^\s*GLIBC_TUNABLES="([^"]*)"/m.exec(DOCKERFILE)?.[1];

/** The environment the image sets for node. */
export const SHIPPED_ENV: Record<string, string> = {
  NODE_OPTIONS: /NODE_OPTIONS="([^"]*)"/.exec(DOCKERFILE)?.[1] ?? '',
  ...(GLIBC_TUNABLES !== undefined && { GLIBC_TUNABLES }),
};

/** The ENTRYPOINT's node flags (`["node", <flags>, "dist/main.js"]`): V8 flags NODE_OPTIONS refuses. */
export const SHIPPED_NODE_FLAGS: readonly string[] = (
  JSON.parse(/^ENTRYPOINT (\[.*\])\s*$/m.exec(DOCKERFILE)?.[1] ?? '[]') as string[]
).slice(1, -1);
