/**
 * Where the callers' keys come from (docs/configuration.md "Caller identity"): a JWKS URL, or the
 * issuer's discovery document's `jwks_uri`, fetched over verified TLS through the injected
 * dispatcher (with `callers.jwt.caFile` among its roots), presenting `callers.jwt.bearerFile`'s
 * token (re-read at each fetch: the kubelet rotates it); or a mounted JWKS file, re-read at each
 * refresh. Answers are read up to MAX_JWKS_BYTES.
 */
import type { JSONWebKeySet } from 'jose';
import type { Dispatcher } from 'undici';
import type { ReadTextFile } from '../config/credentials.js';
import type { CallerJwtConfig } from '../config/types.js';
import { describeCause } from '../safe-text.js';
import { getOnce } from '../token/wire.js';
import type { JwksSource } from './keys.js';

/** Largest key set or discovery document read. */
export const MAX_JWKS_BYTES = 1024 * 1024;
/** Largest `callers.jwt.bearerFile` read (a projected service-account token is a few KiB). */
export const MAX_BEARER_FILE_BYTES = 64 * 1024;
/** One fetch, connect to last byte. */
export const JWKS_TIMEOUT_MS = 10_000;

/** `path`'s text, or an error naming it: `<path>: cannot read (<why>)`. */
async function readNamingFile(
  readFile: ReadTextFile,
  path: string,
  maxBytes: number,
): Promise<string> {
  try {
    return await readFile(path, maxBytes);
  } catch (error) {
    throw new Error(`${path}: cannot read (${describeCause(error)})`, { cause: error });
  }
}

export interface UrlSourceOptions {
  jwt: Pick<CallerJwtConfig, 'issuer' | 'keys' | 'bearerFile'>;
  dispatcher: Dispatcher;
  readFile: ReadTextFile;
  timeoutMs?: number;
}

/** The discovery document's address (OpenID Connect Discovery 1.0 §4). */
export function discoveryUrl(issuer: string): string {
  return `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
}

/** One JSON document, read up to MAX_JWKS_BYTES; `bearerFile` read now when given. */
async function getJson(
  url: string,
  how: {
    dispatcher: Dispatcher;
    readFile: ReadTextFile;
    bearerFile: string | undefined;
    timeoutMs: number;
  },
): Promise<unknown> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (how.bearerFile !== undefined) {
    const token = (
      await readNamingFile(how.readFile, how.bearerFile, MAX_BEARER_FILE_BYTES)
    ).trim();
    if (token !== '') headers.authorization = `Bearer ${token}`;
  }
  let answer;
  try {
    answer = await getOnce(how.dispatcher, {
      url,
      headers,
      maxBytes: MAX_JWKS_BYTES,
      signal: AbortSignal.timeout(how.timeoutMs),
    });
  } catch (error) {
    throw new Error(`${url}: ${describeCause(error)}`, { cause: error });
  }
  if (answer.tooLarge) throw new Error(`${url}: answer larger than ${MAX_JWKS_BYTES} bytes`);
  if (answer.status !== 200) throw new Error(`${url}: answered ${answer.status}`);
  try {
    return JSON.parse(answer.text) as unknown;
  } catch {
    throw new Error(`${url}: the answer is not JSON`);
  }
}

/** A JWKS from `callers.jwt.jwksUrl`, or from the issuer's discovery document when none is set. */
export function urlSource(options: UrlSourceOptions): JwksSource {
  const { jwt, dispatcher, readFile } = options;
  const timeoutMs = options.timeoutMs ?? JWKS_TIMEOUT_MS;
  const configured = jwt.keys.kind === 'url' ? jwt.keys.url : undefined;
  const discovery = discoveryUrl(jwt.issuer);
  let discovered: string | undefined;
  const fetchJson = (url: string, bearer: boolean): Promise<unknown> =>
    getJson(url, {
      dispatcher,
      readFile,
      bearerFile: bearer ? jwt.bearerFile : undefined,
      timeoutMs,
    });

  /** The bearer goes only where the operator pointed: the issuer's origin or the configured URL. */
  const presentsBearer = (url: string): boolean =>
    url === configured || new URL(url).origin === new URL(discovery).origin;

  async function jwksUri(): Promise<string> {
    if (configured !== undefined) return configured;
    if (discovered !== undefined) return discovered;
    const document = await fetchJson(discovery, true);
    const uri = (document as { jwks_uri?: unknown } | null)?.jwks_uri;
    if (typeof uri !== 'string' || !uri.startsWith('https://')) {
      throw new Error(`${discovery}: no https jwks_uri in the discovery document`);
    }
    discovered = uri;
    return uri;
  }

  return {
    description: configured ?? discovery,
    async fetch() {
      const uri = await jwksUri();
      try {
        return (await fetchJson(uri, presentsBearer(uri))) as JSONWebKeySet;
      } catch (error) {
        // The issuer may have moved its keys: ask the discovery document again next time.
        discovered = undefined;
        throw error;
      }
    },
  };
}

/**
 * A mounted JWKS (`callers.jwt.jwksFile`): read at each refresh, so a changed file is seen; one
 * larger than MAX_JWKS_BYTES is refused, as an answer that large is.
 */
export function fileSource(file: string, readFile: ReadTextFile): JwksSource {
  return {
    description: file,
    async fetch() {
      const text = await readNamingFile(readFile, file, MAX_JWKS_BYTES);
      try {
        return JSON.parse(text) as JSONWebKeySet;
      } catch {
        throw new Error(`${file}: not a JSON key set`);
      }
    },
  };
}
