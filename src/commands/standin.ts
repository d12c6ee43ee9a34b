/**
 * `oauth-sidecar standin`: the embedded stand-in of the API alone, on a port of its own, so `check`
 * and `serve` can be tried for real, offline (docs/operations.md "On a laptop or VM"). It writes its
 * throwaway CA and a credentials CSV for its client under `./standin/` and prints the variables
 * that point the sidecar at it. It is the callers' token issuer too (`CALLER_AUTH=jwt`): its
 * signing key is kept in `./standin/caller-key.pem` across runs, and `oauth-sidecar standin token`
 * mints a caller token under that key, offline.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { TokenRequest } from '../cli.js';
import { systemClock } from '../clock.js';
import { parseListen } from '../config/schema.js';
import type { Io } from './check.js';

/** Where the stand-in listens unless `STANDIN_LISTEN` says otherwise. */
export const STANDIN_LISTEN = '127.0.0.1:8443';
/** The folder, under the working directory, for its CA and credentials. */
export const STANDIN_DIR = 'standin';

/** The caller-token signing key (PKCS#8 PEM, 0600), kept across runs; and the issuer's URL. */
const CALLER_KEY = join(STANDIN_DIR, 'caller-key.pem');
const CALLER_ISSUER = join(STANDIN_DIR, 'caller-issuer');
/** The rule the printed recipe suggests: any service account of namespace `laptop`. */
export const STANDIN_CALLER_RULES = 'system:serviceaccount:laptop:*=laptop';

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
  const callerKeyPem = await readOptional(CALLER_KEY);
  const keyProblem = await callerKeyProblem(callerKeyPem);
  if (keyProblem !== undefined) {
    io.err(`oauth-sidecar standin: ${CALLER_KEY}: ${keyProblem} (remove it for a new key)`);
    return 1;
  }
  let standin;
  try {
    standin = await startStandin({ host: listen.host, port: listen.port, ...CLIENT, callerKeyPem });
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
  await writeFile(CALLER_KEY, standin.caller.keyPem, { mode: 0o600 });
  await writeFile(CALLER_ISSUER, `${standin.url}\n`);
  io.out(`stand-in API on ${standin.url} (Ctrl-C stops it); in another shell, for the API:`);
  io.out(
    `export UPSTREAM_BASE_URL=${standin.url} UPSTREAM_CA_FILE=${shellWord(ca)} CLIENT_CREDENTIALS_CSV=${shellWord(csv)}`,
  );
  io.out('and to make callers prove who they are (the stand-in is their token issuer too):');
  io.out(
    `export CALLER_AUTH=jwt CALLER_JWT_ISSUER=${standin.url} CALLER_JWT_CA_FILE=${shellWord(ca)} CALLER_RULES='${STANDIN_CALLER_RULES}'`,
  );
  io.out(
    `curl -H "Authorization: Bearer $(node dist/main.js standin token --sub system:serviceaccount:laptop:me)" http://127.0.0.1:8080/v1.0/contracts/`,
  );
  return { close: () => standin.close() };
}

/** `text` as one POSIX shell word: as it is when it holds no special character, else single-quoted. */
export function shellWord(text: string): string {
  return /^[\w./:@%+=,-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}

/**
 * `oauth-sidecar standin token`: a caller token of the stand-in started in this directory (its key
 * and URL under `./standin/`), on stdout alone, for `curl -H "Authorization: Bearer $(...)"`.
 */
export async function printStandinToken(request: TokenRequest, io: Io): Promise<number> {
  const [keyPem, issuer] = [await readOptional(CALLER_KEY), await readOptional(CALLER_ISSUER)];
  if (keyPem === undefined || issuer === undefined) {
    io.err(
      `oauth-sidecar standin token: no ${CALLER_KEY} or ${CALLER_ISSUER} here: start \`oauth-sidecar standin\` in this directory first`,
    );
    return 1;
  }
  const { createCallerIssuer, callerClaimsProblem } = await import('../standin/issuer.js');
  const claims = { sub: request.sub, aud: request.aud, ttlSeconds: request.ttlSeconds };
  const problem = callerClaimsProblem(claims);
  if (problem !== undefined) {
    io.err(`oauth-sidecar standin token: ${problem}`);
    return 64;
  }
  const keyProblem = await callerKeyProblem(keyPem);
  if (keyProblem !== undefined) {
    io.err(`oauth-sidecar standin token: ${CALLER_KEY}: ${keyProblem}`);
    return 1;
  }
  const minter = await createCallerIssuer(keyPem);
  io.out(await minter.mint(issuer.trim(), claims, systemClock.now()));
  return 0;
}

/** Why a kept caller key cannot be used, or undefined (also when there is none). */
async function callerKeyProblem(keyPem: string | undefined): Promise<string | undefined> {
  if (keyPem === undefined) return undefined;
  const { createCallerIssuer } = await import('../standin/issuer.js');
  try {
    await createCallerIssuer(keyPem);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** A file's text, or undefined when it does not exist. */
async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
