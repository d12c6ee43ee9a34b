/**
 * Client credentials from one of three sources (docs/configuration.md "Credentials"): inline values, two
 * files (a Kubernetes Secret volume) or the CSV downloaded from the portal. Files are read again
 * on every call, so a rotated Secret applies to the next client-credentials grant. No message
 * produced here ever contains a client id or secret.
 */
import { createHash } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { inspect } from 'node:util';
import { systemClock, withDeadline, type Clock } from '../clock.js';
import type { ClientCredentials, CredentialsConfig, CredentialsReader } from './types.js';

/**
 * Reads a whole text file, refusing one larger than `maxBytes` when given; injected so tests and
 * callers can substitute their own I/O.
 */
export type ReadTextFile = (path: string, maxBytes?: number) => Promise<string>;

/** Longest one read of the credentials may take (a hung NFS or FUSE mount); then the attempt fails. */
export const CREDENTIALS_READ_TIMEOUT_MS = 5_000;

/** A file that is there but cannot be used as text; `reason` says why in a few words. */
export class FileReadError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'FileReadError';
  }
}

/**
 * Reads a regular file (or a link to one) as UTF-8 text. A FIFO, socket or device is refused at
 * once: reading one can block forever. UTF-16 and other non-UTF-8 content is refused with a
 * message saying so, instead of being parsed as garbage.
 */
export const readTextFile: ReadTextFile = async (path, maxBytes) => {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stats = await handle.stat();
    if (stats.isDirectory()) throw new FileReadError('is a directory');
    if (!stats.isFile()) throw new FileReadError(`${fileKind(stats)}, not a regular file`);
    if (maxBytes === undefined) return decodeText(await handle.readFile());
    if (stats.size > maxBytes) {
      throw new FileReadError(`is ${stats.size} bytes, more than the ${maxBytes} read`);
    }
    // One byte past the bound, however much is there: a file that grew since the stat, or one
    // whose size says less than it holds (procfs and sysfs say 0), is refused at the bound.
    const bytes = await readUpTo(handle, maxBytes + 1);
    if (bytes.length > maxBytes) {
      throw new FileReadError(
        `holds more than the ${maxBytes} bytes read (its size says ${stats.size})`,
      );
    }
    return decodeText(bytes);
  } finally {
    await handle.close();
  }
};

/** The first `limit` bytes of `handle`, or all of it if it holds fewer. */
async function readUpTo(handle: FileHandle, limit: number): Promise<Uint8Array> {
  const buffer = Buffer.allocUnsafe(limit);
  let length = 0;
  while (length < limit) {
    const { bytesRead } = await handle.read(buffer, length, limit - length, length);
    if (bytesRead === 0) break;
    length += bytesRead;
  }
  return buffer.subarray(0, length);
}

/**
 * `readFile`, one read of a file at a time: while one is still pending (a hung NFS or FUSE mount:
 * the attempt's deadline gave up on it, the read did not end), the next fails at once instead of
 * starting another. A hung mount then holds one of libuv's threads (4 by default, shared with DNS
 * lookups and every other file read), not one more at every retry.
 */
export function oneReadAtATime(readFile: ReadTextFile): ReadTextFile {
  const pending = new Set<string>();
  return async (path, maxBytes) => {
    if (pending.has(path)) {
      throw new FileReadError('its previous read has not finished (a hung mount?)');
    }
    pending.add(path);
    try {
      return await readFile(path, maxBytes);
    } finally {
      pending.delete(path);
    }
  };
}

function fileKind(stats: Stats): string {
  if (stats.isFIFO()) return 'is a FIFO (named pipe)';
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return 'is a device';
  if (stats.isSocket()) return 'is a socket';
  return 'is a special file';
}

/** UTF-8 (a BOM is allowed), else a clear refusal. */
function decodeText(bytes: Uint8Array): string {
  const [a, b] = bytes;
  if ((a === 0xff && b === 0xfe) || (a === 0xfe && b === 0xff) || bytes.includes(0)) {
    throw new FileReadError('is UTF-16 (or holds NUL bytes), not UTF-8 text: save it as UTF-8');
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new FileReadError('is not UTF-8 text: save it as UTF-8');
  }
}

/** A credentials file problem; the message names the file and the fault, never a value. */
export class CredentialsFileError extends Error {
  /** The file at fault. */
  readonly path: string;
  /** What is wrong with it, e.g. `file is empty`. */
  readonly fault: string;

  constructor(what: string, path: string, fault: string, options?: { cause?: unknown }) {
    super(`${what} ${path}: ${fault}`, options);
    this.name = 'CredentialsFileError';
    this.path = path;
    this.fault = fault;
  }
}

const FS_REASONS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'is a directory',
  ELOOP: 'too many symbolic links',
};

/** Why a read failed, in a few words: the fs error code, not its (path-bearing) message. */
export function readFailure(error: unknown): string {
  if (error instanceof FileReadError) return error.reason;
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'EACCES' || code === 'EPERM') return permissionDenied(process.getuid?.());
  if (typeof code === 'string') return FS_REASONS[code] ?? code;
  return 'unreadable';
}

/**
 * A file the process's user cannot read: names the uid, since in the image it is 1000 and a file
 * protected for its owner on the host (`chmod 600`, root) is unreadable there.
 */
export function permissionDenied(uid: number | undefined): string {
  if (uid === undefined) return 'permission denied';
  return (
    `permission denied for uid ${uid} (the image runs as uid 1000): make it readable to that ` +
    'user, e.g. chown it to that uid or chmod 0644 a copy that only this container mounts'
  );
}

async function readOrThrow(readFile: ReadTextFile, path: string, what: string): Promise<string> {
  try {
    return await readFile(path);
  } catch (error) {
    throw new CredentialsFileError(what, path, `cannot read (${readFailure(error)})`, {
      cause: error,
    });
  }
}

/** A file holding one value; surrounding whitespace (the Secret's trailing newline) is dropped. */
export async function readValueFile(
  readFile: ReadTextFile,
  path: string,
  what: string,
): Promise<string> {
  const value = (await readOrThrow(readFile, path, what)).replace(/^\uFEFF/, '').trim();
  if (value === '') throw new CredentialsFileError(what, path, 'file is empty');
  return value;
}

/** Split CSV text into rows of fields (RFC 4180: quotes, doubled quotes, CRLF or LF). */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let fieldText = '';
  let quoted = false;
  let i = 0;
  const input = text.replace(/^\uFEFF/, '');
  while (i < input.length) {
    const ch = input[i] as string;
    if (quoted) {
      if (ch === '"' && input[i + 1] === '"') {
        fieldText += '"';
        i += 2;
        continue;
      }
      if (ch === '"') quoted = false;
      else fieldText += ch;
      i += 1;
      continue;
    }
    if (ch === '"' && fieldText.trim() === '') {
      fieldText = '';
      quoted = true;
    } else if (ch === ',') {
      row.push(fieldText);
      fieldText = '';
    } else if (ch === '\n' || ch === '\r') {
      row.push(fieldText);
      rows.push(row);
      row = [];
      fieldText = '';
      if (ch === '\r' && input[i + 1] === '\n') i += 1;
    } else {
      fieldText += ch;
    }
    i += 1;
  }
  if (quoted) throw new Error('unterminated quoted field');
  if (fieldText !== '' || row.length > 0) {
    row.push(fieldText);
    rows.push(row);
  }
  return rows;
}

/** `clientId`, `client_id`, `Client ID`... all name the same column. */
const columnName = (header: string): string =>
  header
    .trim()
    .toLowerCase()
    .replace(/[^a-z]/g, '');

/**
 * The credentials in a portal CSV: a header naming `clientId,clientSecret` or
 * `client_id,client_secret` (any case, extra columns ignored) and exactly one data row.
 * Throws with the file name and the fault, never a cell's content (a headerless file's first
 * line would be the secret itself).
 */
export function parseCredentialsCsv(text: string, path: string): ClientCredentials {
  const what = 'credentials CSV';
  let rows: string[][];
  try {
    rows = parseCsv(text);
  } catch {
    throw new CredentialsFileError(what, path, 'malformed CSV (unterminated quoted field)');
  }
  // Blank lines are skipped; a line of bare commas is a row whose values are empty.
  rows = rows.filter((row) => row.length > 1 || (row[0] ?? '').trim() !== '');
  const [header, ...data] = rows;
  if (header === undefined) throw new CredentialsFileError(what, path, 'file is empty');
  const names = header.map(columnName);
  const idColumn = names.indexOf('clientid');
  const secretColumn = names.indexOf('clientsecret');
  if (idColumn < 0 || secretColumn < 0) {
    throw new CredentialsFileError(
      what,
      path,
      'first line must be the header clientId,clientSecret or client_id,client_secret',
    );
  }
  if (data.length !== 1) {
    throw new CredentialsFileError(
      what,
      path,
      `expected exactly one row of credentials under the header, found ${data.length}`,
    );
  }
  const row = data[0] as string[];
  const clientId = (row[idColumn] ?? '').trim();
  const clientSecret = (row[secretColumn] ?? '').trim();
  const empty = [clientId === '' ? 'client id' : '', clientSecret === '' ? 'client secret' : '']
    .filter((name) => name !== '')
    .join(' and ');
  if (empty !== '') throw new CredentialsFileError(what, path, `the ${empty} is empty`);
  return { clientId, clientSecret };
}

/**
 * Keep the id and secret out of `JSON.stringify` (pino) and `util.inspect` (console) while
 * leaving the fields readable: an accidental `log.info(credentials)` prints `[redacted]`.
 * Other fields (e.g. `source`) are shown as they are.
 */
export function redacted<T extends object>(credentials: T): T {
  const safe = (): Record<string, unknown> =>
    Object.fromEntries(
      Object.entries(credentials).map(([key, value]) => [
        key,
        key === 'clientId' || key === 'clientSecret' ? '[redacted]' : value,
      ]),
    );
  Object.defineProperty(credentials, 'toJSON', { value: safe, enumerable: false });
  Object.defineProperty(credentials, inspect.custom, { value: safe, enumerable: false });
  return credentials;
}

/**
 * Read the credentials once from their configured source. Files are trimmed; the CSV is parsed
 * with {@link parseCredentialsCsv}. Rejects with {@link CredentialsFileError}, whose message
 * names the file and the fault but never a value.
 */
export async function readClientCredentials(
  credentials: CredentialsConfig,
  readFile: ReadTextFile = readTextFile,
): Promise<ClientCredentials> {
  switch (credentials.source) {
    case 'inline':
      return redacted({ clientId: credentials.clientId, clientSecret: credentials.clientSecret });
    case 'files': {
      // Settled, not raced: a file refused at once must not end the attempt while the other's read
      // goes on, which the next attempt would take for a hung mount ({@link oneReadAtATime}).
      const [clientId, clientSecret] = await Promise.allSettled([
        readValueFile(readFile, credentials.clientIdFile, 'client id file'),
        readValueFile(readFile, credentials.clientSecretFile, 'client secret file'),
      ]);
      if (clientId.status === 'rejected') throw clientId.reason;
      if (clientSecret.status === 'rejected') throw clientSecret.reason;
      return redacted({ clientId: clientId.value, clientSecret: clientSecret.value });
    }
    case 'csv': {
      const path = credentials.csvFile;
      const text = await readOrThrow(readFile, path, 'credentials CSV');
      return redacted(parseCredentialsCsv(text, path));
    }
  }
}

/**
 * A {@link CredentialsReader} for the keeper: every call reads the source again, so a Kubernetes
 * Secret rotation (in-place rewrite or the atomic `..data` symlink swap; the path is resolved
 * afresh on each open) applies to the next client-credentials grant without a restart. Rejects
 * with a {@link CredentialsFileError} when a file became unreadable, empty or malformed.
 *
 * The one detector of changed credentials: `onChange` is called after a read whose
 * {@link credentialsFingerprint} differs from the previous successful read (not on the first one).
 *
 * Each read is bounded by `timeoutMs` (5 s): a read still pending then (a hung mount) fails this
 * call, and while it hangs later calls fail at once ({@link oneReadAtATime}) instead of waiting
 * for it or starting another read of the same file.
 */
export function createCredentialsReader(
  credentials: CredentialsConfig,
  readFile: ReadTextFile = readTextFile,
  options: {
    onChange?: (change: { previous: string; current: string }) => void;
    clock?: Clock;
    timeoutMs?: number;
  } = {},
): CredentialsReader {
  const clock = options.clock ?? systemClock;
  const timeoutMs = options.timeoutMs ?? CREDENTIALS_READ_TIMEOUT_MS;
  const readOnce = oneReadAtATime(readFile);
  let previous: string | undefined;
  return async () => {
    const current = await withDeadline(
      readClientCredentials(credentials, readOnce),
      clock,
      timeoutMs,
      'reading the credentials',
    );
    const fingerprint = credentialsFingerprint(current);
    if (previous !== undefined && previous !== fingerprint) {
      options.onChange?.({ previous, current: fingerprint });
    }
    previous = fingerprint;
    return current;
  };
}

/**
 * A short, non-secret fingerprint of a credential pair: the first 8 hex characters of
 * sha256(clientId NUL clientSecret). Equal pairs give equal fingerprints, so the keeper can log
 * "client credentials changed" with both fingerprints, and operators can tell which pair a
 * replica uses. 32 bits of a hash reveal nothing useful about a high-entropy secret.
 */
export function credentialsFingerprint(credentials: ClientCredentials): string {
  return createHash('sha256')
    .update(credentials.clientId)
    .update('\0')
    .update(credentials.clientSecret)
    .digest('hex')
    .slice(0, 8);
}
