import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import {
  CredentialsFileError,
  FileReadError,
  createCredentialsReader,
  readClientCredentials,
  credentialsFingerprint,
  parseCredentialsCsv,
  parseCsv,
  readTextFile,
} from './credentials.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oauth-sidecar-credentials-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function rejection(promise: Promise<unknown>): Promise<Error> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CredentialsFileError);
  return error as Error;
}

/**
 * Lay out a Secret volume the way the kubelet does: the real files live in a timestamped
 * directory, `..data` points at it, and each key is a symlink through `..data`.
 */
async function kubernetesVolume(version: string, id: string, secret: string): Promise<void> {
  await mkdir(join(dir, version));
  await writeFile(join(dir, version, 'client-id'), `${id}\n`);
  await writeFile(join(dir, version, 'client-secret'), `${secret}\n`);
  await symlink(version, join(dir, '..data'));
  await symlink(join('..data', 'client-id'), join(dir, 'client-id'));
  await symlink(join('..data', 'client-secret'), join(dir, 'client-secret'));
}

/** The kubelet's rotation: write the new version, then rename a fresh symlink over `..data`. */
async function swapVolume(version: string, id: string, secret: string): Promise<void> {
  await mkdir(join(dir, version));
  await writeFile(join(dir, version, 'client-id'), `${id}\n`);
  await writeFile(join(dir, version, 'client-secret'), `${secret}\n`);
  await symlink(version, join(dir, '..data_tmp'));
  await rename(join(dir, '..data_tmp'), join(dir, '..data'));
}

describe('createCredentialsReader', () => {
  it('returns inline credentials', async () => {
    const read = createCredentialsReader({ source: 'inline', clientId: 'i', clientSecret: 's' });
    expect(await read()).toEqual({ clientId: 'i', clientSecret: 's' });
  });

  it('re-reads the files after an in-place rewrite, trimmed', async () => {
    const clientIdFile = join(dir, 'client-id');
    const clientSecretFile = join(dir, 'client-secret');
    await writeFile(clientIdFile, 'id-1\n');
    await writeFile(clientSecretFile, '  secret-1\r\n');
    const read = createCredentialsReader({ source: 'files', clientIdFile, clientSecretFile });
    expect(await read()).toEqual({ clientId: 'id-1', clientSecret: 'secret-1' });

    await writeFile(clientSecretFile, 'secret-2\n');
    expect(await read()).toEqual({ clientId: 'id-1', clientSecret: 'secret-2' });
  });

  it('follows the Kubernetes ..data symlink swap', async () => {
    await kubernetesVolume('..2026_01_01_00_00_00.1', 'id-1', 'secret-1');
    const read = createCredentialsReader({
      source: 'files',
      clientIdFile: join(dir, 'client-id'),
      clientSecretFile: join(dir, 'client-secret'),
    });
    expect(await read()).toEqual({ clientId: 'id-1', clientSecret: 'secret-1' });

    await swapVolume('..2026_02_01_00_00_00.2', 'id-2', 'secret-2');
    await rm(join(dir, '..2026_01_01_00_00_00.1'), { recursive: true });
    expect(await read()).toEqual({ clientId: 'id-2', clientSecret: 'secret-2' });
  });

  it('re-reads the CSV on every call', async () => {
    const csvFile = join(dir, 'credentials.csv');
    await writeFile(csvFile, 'clientId,clientSecret\nid-1,secret-1\n');
    const read = createCredentialsReader({ source: 'csv', csvFile });
    expect(await read()).toEqual({ clientId: 'id-1', clientSecret: 'secret-1' });
    await writeFile(csvFile, 'client_id,client_secret\r\n"id-2","secret-2"\r\n');
    expect(await read()).toEqual({ clientId: 'id-2', clientSecret: 'secret-2' });
  });

  it('rejects, without the secret, when a file became empty or unreadable', async () => {
    const clientIdFile = join(dir, 'client-id');
    const clientSecretFile = join(dir, 'client-secret');
    await writeFile(clientIdFile, 'id-1');
    await writeFile(clientSecretFile, 'secret-1');
    const read = createCredentialsReader({ source: 'files', clientIdFile, clientSecretFile });
    await read();

    await writeFile(clientSecretFile, '\n');
    const empty = await rejection(read());
    expect(empty.message).toBe(`client secret file ${clientSecretFile}: file is empty`);

    await unlink(clientSecretFile);
    const gone = await rejection(read());
    expect(gone.message).toBe(`client secret file ${clientSecretFile}: cannot read (no such file)`);
    expect(`${gone.message} ${inspect(gone)}`).not.toContain('secret-1');
  });

  it('rejects, without the secret, when the CSV became malformed', async () => {
    const csvFile = join(dir, 'credentials.csv');
    await writeFile(csvFile, 'the-id,the-secret\n');
    const read = createCredentialsReader({ source: 'csv', csvFile });
    const error = await rejection(read());
    expect(error.message).toBe(
      `credentials CSV ${csvFile}: first line must be the header clientId,clientSecret or client_id,client_secret`,
    );
    expect(inspect(error)).not.toContain('the-secret');
  });

  it('uses the injected readFile', async () => {
    const readFile = vi.fn((path: string) => Promise.resolve(path === '/id' ? 'i\n' : 's\n'));
    const read = createCredentialsReader(
      { source: 'files', clientIdFile: '/id', clientSecretFile: '/secret' },
      readFile,
    );
    expect(await read()).toEqual({ clientId: 'i', clientSecret: 's' });
    await read();
    expect(readFile).toHaveBeenCalledTimes(4);
  });

  it('calls onChange with fingerprints when the pair changed since the previous read', async () => {
    let secret = 'secret-1';
    const onChange = vi.fn();
    const read = createCredentialsReader(
      { source: 'files', clientIdFile: '/id', clientSecretFile: '/secret' },
      (path) => Promise.resolve(path === '/id' ? 'id' : secret),
      { onChange },
    );
    await read();
    await read();
    expect(onChange).not.toHaveBeenCalled();
    secret = 'secret-2';
    await read();
    expect(onChange).toHaveBeenCalledExactlyOnceWith({
      previous: credentialsFingerprint({ clientId: 'id', clientSecret: 'secret-1' }),
      current: credentialsFingerprint({ clientId: 'id', clientSecret: 'secret-2' }),
    });
  });

  it('keeps the secret out of JSON and inspect output', async () => {
    const read = createCredentialsReader({ source: 'inline', clientId: 'i', clientSecret: 'hush' });
    const credentials = await read();
    expect(credentials.clientSecret).toBe('hush');
    expect(JSON.stringify({ credentials })).not.toContain('hush');
    expect(inspect(credentials)).not.toContain('hush');
    expect({ ...credentials }).toEqual({ clientId: 'i', clientSecret: 'hush' });
  });
});

describe('credentialsFingerprint', () => {
  it('is 8 hex characters, stable, and differs when either value changes', () => {
    const a = credentialsFingerprint({ clientId: 'id', clientSecret: 'secret' });
    expect(a).toMatch(/^[0-9a-f]{8}$/);
    expect(credentialsFingerprint({ clientId: 'id', clientSecret: 'secret' })).toBe(a);
    expect(credentialsFingerprint({ clientId: 'id', clientSecret: 'secret2' })).not.toBe(a);
    expect(credentialsFingerprint({ clientId: 'id2', clientSecret: 'secret' })).not.toBe(a);
    // The separator keeps ("ab", "c") and ("a", "bc") apart.
    expect(credentialsFingerprint({ clientId: 'ab', clientSecret: 'c' })).not.toBe(
      credentialsFingerprint({ clientId: 'a', clientSecret: 'bc' }),
    );
  });
});

describe('parseCsv / parseCredentialsCsv', () => {
  it('handles quotes, doubled quotes, commas and newlines inside quotes, CRLF and BOM', () => {
    expect(parseCsv('\uFEFFa,"b,c","d""e"\r\n"x\ny",z')).toEqual([
      ['a', 'b,c', 'd"e'],
      ['x\ny', 'z'],
    ]);
  });

  it('keeps a secret containing commas and quotes when quoted', () => {
    expect(parseCredentialsCsv('clientId,clientSecret\nid,"a,b""c"\n', 'f.csv')).toEqual({
      clientId: 'id',
      clientSecret: 'a,b"c',
    });
  });

  it('accepts the columns in either order', () => {
    expect(parseCredentialsCsv('client_secret,client_id\ns,i\n', 'f.csv')).toEqual({
      clientId: 'i',
      clientSecret: 's',
    });
  });
});

describe('bounded credential reading', () => {
  const files = (secretFile: string) =>
    ({ source: 'files', clientIdFile: join(dir, 'id'), clientSecretFile: secretFile }) as const;

  it('refuses a file larger than the bound it is read with, and reads one at the bound', async () => {
    const file = join(dir, 'keys.json');
    await writeFile(file, 'x'.repeat(1024));
    expect(await readTextFile(file, 1024)).toHaveLength(1024);
    await expect(readTextFile(file, 1023)).rejects.toThrow(
      'is 1024 bytes, more than the 1023 read',
    );
    expect(await readTextFile(file)).toHaveLength(1024);
  });

  it('reads no further than the bound a file whose size says less (procfs says 0)', async () => {
    // A few KiB of text, and a size of 0: its size cannot refuse it, the bound on the read does.
    await expect(readTextFile('/proc/self/maps', 1024)).rejects.toThrow(
      'holds more than the 1024 bytes read (its size says 0)',
    );
    expect(await readTextFile('/proc/self/maps', 1024 * 1024)).toContain('\n');
  });

  it('refuses a FIFO at once instead of blocking on it', async () => {
    await writeFile(join(dir, 'id'), 'client-id\n');
    execFileSync('mkfifo', [join(dir, 'secret')]);
    const error = await rejection(readClientCredentials(files(join(dir, 'secret'))));
    expect(error.message).toBe(
      `client secret file ${join(dir, 'secret')}: cannot read (is a FIFO (named pipe), not a regular file)`,
    );
  });

  it('refuses a device', async () => {
    await writeFile(join(dir, 'id'), 'client-id\n');
    const error = await rejection(readClientCredentials(files('/dev/zero')));
    expect(error.message).toContain('cannot read (is a device, not a regular file)');
  });

  it('reads a regular file through a symbolic link', async () => {
    await writeFile(join(dir, 'id'), 'client-id\n');
    await writeFile(join(dir, 'real-secret'), 'the-secret\n');
    await symlink(join(dir, 'real-secret'), join(dir, 'secret'));
    await expect(readClientCredentials(files(join(dir, 'secret')))).resolves.toEqual({
      clientId: 'client-id',
      clientSecret: 'the-secret',
    });
  });

  it('says a UTF-16 CSV is not UTF-8 (not "found 4 rows")', async () => {
    const csv = join(dir, 'credentials.csv');
    const text = '\uFEFFclientId,clientSecret\r\nan-id,a-secret\r\n';
    await writeFile(csv, Buffer.from(text, 'utf16le'));
    const error = await rejection(readClientCredentials({ source: 'csv', csvFile: csv }));
    expect(error.message).toContain('UTF-16');
    expect(error.message).toContain('save it as UTF-8');
    expect(error.message).not.toContain('found');
  });

  it('says a Latin-1 CSV is not UTF-8', async () => {
    const csv = join(dir, 'credentials.csv');
    await writeFile(csv, Buffer.from('clientId,clientSecret\nan-id,s\xe9cret\n', 'latin1'));
    const error = await rejection(readClientCredentials({ source: 'csv', csvFile: csv }));
    expect(error.message).toContain('is not UTF-8 text');
    expect(error.message).not.toContain('s\xe9cret');
  });

  it('fails a read still pending after 5 s; while it hangs, later calls fail at once without another read', async () => {
    vi.useFakeTimers();
    try {
      const hung = new Map<string, (text: string) => void>();
      let answer = true;
      const readFile = vi.fn(
        (path: string) =>
          // A hung mount: reads hang until the test ends them; then they answer.
          new Promise<string>((resolve) => {
            if (answer) hung.set(path, resolve);
            else resolve('value');
          }),
      );
      const read = createCredentialsReader(files('/secret'), readFile, { clock: systemClock });
      const failure = (promise: Promise<unknown>) =>
        promise.then(
          () => undefined,
          (e: unknown) => (e as Error).message,
        );
      const first = failure(read());
      await vi.advanceTimersByTimeAsync(4999);
      expect(readFile).toHaveBeenCalledTimes(2);
      await vi.advanceTimersByTimeAsync(1);
      expect(await first).toBe('reading the credentials did not finish within 5000 ms');
      // Each retry used to start two more reads: one more libuv thread per hung file each time.
      for (let retry = 0; retry < 5; retry++) {
        expect(await failure(read())).toBe(
          `client id file ${join(dir, 'id')}: cannot read (its previous read has not finished (a hung mount?))`,
        );
      }
      expect(readFile).toHaveBeenCalledTimes(2);
      // The mount comes back: the hung reads end, and the next call reads again.
      answer = false;
      for (const end of hung.values()) end('stale');
      await vi.advanceTimersByTimeAsync(0);
      await expect(read()).resolves.toEqual({ clientId: 'value', clientSecret: 'value' });
      expect(readFile).toHaveBeenCalledTimes(4);
    } finally {
      vi.useRealTimers();
    }
  });

  it('an attempt ends when both reads have: one file failing at once does not leave the other read behind to refuse the next attempt', async () => {
    // The secret file became a FIFO (refused at once); the id file's read takes a moment longer.
    const readFile = vi.fn((path: string) =>
      path.endsWith('secret')
        ? Promise.reject(new FileReadError('is a FIFO (named pipe), not a regular file'))
        : new Promise<string>((resolve) => setImmediate(() => resolve('an-id'))),
    );
    const read = createCredentialsReader(files('/secret'), readFile);
    for (let attempt = 0; attempt < 3; attempt++) {
      // Each retry names the FIFO, not "its previous read has not finished".
      expect((await rejection(read())).message).toBe(
        'client secret file /secret: cannot read (is a FIFO (named pipe), not a regular file)',
      );
    }
    expect(readFile).toHaveBeenCalledTimes(6);
  });
});
