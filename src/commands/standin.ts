/**
 * `oauth-sidecar standin`: the embedded stand-in of the API alone, on a port of its own, so `check`
 * and `serve` can be tried for real, offline (docs/operations.md "On a laptop or VM"). It writes its
 * throwaway CA and a credentials CSV for its client under `./standin/` and prints the variables
 * that point the sidecar at it.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseListen } from '../config/schema.js';
import type { Io } from './check.js';

/** Where the stand-in listens unless `STANDIN_LISTEN` says otherwise. */
export const STANDIN_LISTEN = '127.0.0.1:8443';
/** The folder, under the working directory, for its CA and credentials. */
export const STANDIN_DIR = 'standin';

/** The stand-in's only client: throwaway values, like its CA. */
const CLIENT = { clientId: 'standin-client', clientSecret: 'standin-secret' };

/** Start the stand-in; `close` stops it. An exit code when it cannot start. */
export async function runStandin(
  env: Record<string, string | undefined>,
  io: Io,
): Promise<{ close(): Promise<void> } | number> {
  const listen = parseListen(env.STANDIN_LISTEN ?? STANDIN_LISTEN);
  if (typeof listen === 'string') {
    io.err(`oauth-sidecar standin: STANDIN_LISTEN: ${listen}`);
    return 64;
  }
  const { startStandin } = await import('../standin/index.js');
  let standin;
  try {
    standin = await startStandin({ host: listen.host, port: listen.port, ...CLIENT });
  } catch (error) {
    io.err(
      `oauth-sidecar standin: cannot listen on ${listen.host}:${listen.port} (set STANDIN_LISTEN): ${error instanceof Error ? error.message : String(error)}`,
    );
    return 1;
  }
  // Absolute, so the printed line works from any directory.
  const dir = resolve(STANDIN_DIR);
  await mkdir(dir, { recursive: true });
  const ca = resolve(dir, 'ca.pem');
  const csv = resolve(dir, 'credentials.csv');
  // A final newline, so that `cat ca.pem other.pem` is a valid bundle.
  await writeFile(ca, standin.caCert.endsWith('\n') ? standin.caCert : `${standin.caCert}\n`);
  await writeFile(csv, `clientId,clientSecret\n${CLIENT.clientId},${CLIENT.clientSecret}\n`, {
    mode: 0o600,
  });
  io.out(`stand-in API on ${standin.url} (Ctrl-C stops it); in another shell, for the API:`);
  io.out(
    `export UPSTREAM_BASE_URL=${standin.url} UPSTREAM_CA_FILE=${shellWord(ca)} CLIENT_CREDENTIALS_CSV=${shellWord(csv)}`,
  );
  return { close: () => standin.close() };
}

/** `text` as one POSIX shell word: as it is when it holds no special character, else single-quoted. */
export function shellWord(text: string): string {
  return /^[\w./:@%+=,-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}
