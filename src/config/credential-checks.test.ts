import { beforeAll, describe, expect, it } from 'vitest';
import { createTestPki } from '../standin/index.js';
import {
  checkCaFile,
  checkCredentialFiles,
  credentialSource,
  unreadableCertificates,
} from './credential-checks.js';
import type { ReadTextFile } from './credentials.js';
import type { FieldKey, FieldValues } from './schema.js';

const SECRET = 'client-secret-7b1d';
const ALL_SOURCES =
  'CLIENT_ID + CLIENT_SECRET, CLIENT_ID_FILE + CLIENT_SECRET_FILE, or CLIENT_CREDENTIALS_CSV (credentials.*)';

function source(values: Partial<FieldValues>, invalid: FieldKey[] = []) {
  const problems: string[] = [];
  const credentials = credentialSource(values as FieldValues, new Set(invalid), problems);
  return { credentials, problems };
}

/** A file system of these files; any other path is ENOENT. */
function files(contents: Record<string, string>): ReadTextFile {
  return (path) =>
    path in contents
      ? Promise.resolve(contents[path]!)
      : Promise.reject(Object.assign(new Error(`ENOENT ${path}`), { code: 'ENOENT' }));
}

describe('credentialSource', () => {
  it('takes exactly one complete source', () => {
    const inline = source({ 'credentials.clientId': 'id', 'credentials.clientSecret': SECRET });
    expect(inline.problems).toEqual([]);
    expect(inline.credentials).toEqual({ source: 'inline', clientId: 'id', clientSecret: SECRET });
    expect(JSON.stringify(inline.credentials)).not.toContain(SECRET);
    expect(source({ 'credentials.csvFile': '/c.csv' }).credentials).toEqual({
      source: 'csv',
      csvFile: '/c.csv',
    });
    expect(
      source({ 'credentials.clientIdFile': '/id', 'credentials.clientSecretFile': '/secret' })
        .credentials,
    ).toEqual({ source: 'files', clientIdFile: '/id', clientSecretFile: '/secret' });
  });

  it('none set is one problem naming every source', () => {
    expect(source({})).toEqual({
      credentials: undefined,
      problems: [`${ALL_SOURCES}: one credential source is required, none is set`],
    });
  });

  it('two sources, and each half-set one, are all reported, by variable name only', () => {
    const { credentials, problems } = source({
      'credentials.clientSecret': SECRET,
      'credentials.csvFile': '/c.csv',
    });
    expect(credentials).toBeUndefined();
    expect(problems).toEqual([
      `${ALL_SOURCES}: exactly one credential source may be set, found inline (CLIENT_SECRET) and csv (CLIENT_CREDENTIALS_CSV)`,
      'CLIENT_ID (credentials.clientId): required with CLIENT_SECRET (credentials.clientSecret)',
    ]);
    expect(JSON.stringify(problems)).not.toContain(SECRET);
    const both = source({
      'credentials.clientId': 'id',
      'credentials.clientSecret': SECRET,
      'credentials.csvFile': '/c.csv',
    });
    expect(both.credentials).toBeUndefined();
    expect(both.problems).toEqual([
      `${ALL_SOURCES}: exactly one credential source may be set, found inline (CLIENT_ID, CLIENT_SECRET) and csv (CLIENT_CREDENTIALS_CSV)`,
    ]);
  });

  it('a half-set source is a problem; an invalid value counts as set', () => {
    expect(source({ 'credentials.clientIdFile': '/id' }).problems).toEqual([
      'CLIENT_SECRET_FILE (credentials.clientSecretFile): required with CLIENT_ID_FILE (credentials.clientIdFile)',
    ]);
    expect(source({ 'credentials.clientId': 'id' }, ['credentials.clientSecret'])).toEqual({
      credentials: undefined,
      problems: [],
    });
  });
});

describe('checkCredentialFiles', () => {
  it('reads each file now and reports every fault, never a value', async () => {
    const problems: string[] = [];
    await checkCredentialFiles(
      { source: 'files', clientIdFile: '/id', clientSecretFile: '/secret' },
      files({ '/id': '  \n' }),
      problems,
    );
    expect(problems.sort()).toEqual([
      'CLIENT_ID_FILE (credentials.clientIdFile): /id: file is empty',
      'CLIENT_SECRET_FILE (credentials.clientSecretFile): /secret: cannot read (no such file)',
    ]);
    const csv: string[] = [];
    await checkCredentialFiles(
      { source: 'csv', csvFile: '/c.csv' },
      files({ '/c.csv': `${SECRET}\n` }),
      csv,
    );
    expect(csv).toEqual([
      'CLIENT_CREDENTIALS_CSV (credentials.csvFile): /c.csv: first line must be the header clientId,clientSecret or client_id,client_secret',
    ]);
    expect(JSON.stringify(csv)).not.toContain(SECRET);
  });

  it('offline, an absent file is a line not checked; a present bad one still a problem', async () => {
    const problems: string[] = [];
    const notes: string[] = [];
    await checkCredentialFiles(
      { source: 'files', clientIdFile: '/id', clientSecretFile: '/secret' },
      files({ '/id': '' }),
      problems,
      { kind: 'not-checked', note: (line) => notes.push(line) },
    );
    expect(problems).toEqual(['CLIENT_ID_FILE (credentials.clientIdFile): /id: file is empty']);
    expect(notes).toEqual([
      'CLIENT_SECRET_FILE (credentials.clientSecretFile): /secret: not checked (no such file)',
    ]);
  });

  it('inline credentials read no file', async () => {
    const problems: string[] = [];
    await checkCredentialFiles(
      { source: 'inline', clientId: 'id', clientSecret: SECRET },
      () => Promise.reject(new Error('read')),
      problems,
    );
    expect(problems).toEqual([]);
  });
});

describe('checkCaFile and unreadableCertificates', () => {
  let ca = '';
  let server = '';
  beforeAll(async () => {
    const pki = await createTestPki();
    [ca, server] = [pki.caCert.trimEnd(), pki.serverCert.trimEnd()];
  });

  async function checked(text: string | undefined, offline = false) {
    const problems: string[] = [];
    const warnings: string[] = [];
    const notes: string[] = [];
    await checkCaFile(
      '/ca.pem',
      files(text === undefined ? {} : { '/ca.pem': text }),
      problems,
      warnings,
      offline ? { kind: 'not-checked', note: (line) => notes.push(line) } : { kind: 'problem' },
      'callers.jwt.caFile',
    );
    return { problems, warnings, notes };
  }

  it('a bundle of good certificates is fine', async () => {
    expect(unreadableCertificates(`${ca}\n${server}\n`)).toEqual([]);
    expect(await checked(`${ca}\n`)).toEqual({ problems: [], warnings: [], notes: [] });
  });

  it('finds joined, unterminated, trailing-text and garbled certificates, one line each', () => {
    expect(unreadableCertificates(`${ca}${server}\n`)).toEqual([
      'certificate 1 of 2: text after its END line on the same line',
      'certificate 2 of 2: its BEGIN line does not start a line (a file without a final newline joined to another?)',
    ]);
    expect(
      unreadableCertificates(`${ca.replace('-----END CERTIFICATE-----', '')}\n${server}`),
    ).toEqual(['certificate 1 of 2: no END line before the next certificate']);
    expect(unreadableCertificates(`${ca} trailing\n`)).toEqual([
      'certificate 1 of 1: text after its END line on the same line',
    ]);
    const garbled = ca.replace(/\n[A-Za-z0-9+/]{10}/, '\n!!!!!!!!!!');
    expect(unreadableCertificates(garbled)).toEqual([
      'certificate 1 of 1: not a readable X.509 certificate',
    ]);
  });

  it('an unreadable certificate warns when serving and is a problem offline', async () => {
    const joined = `${ca}${server}\n`;
    const serving = await checked(joined);
    expect(serving.problems).toEqual([]);
    expect(serving.warnings).toEqual([
      expect.stringContaining('certificate 1 of 2: text after its END line'),
      expect.stringMatching(
        /^CALLER_JWT_CA_FILE \(callers\.jwt\.caFile\): \/ca\.pem: certificate 2 of 2: .*; the bundle may be trusted in part or not at all$/,
      ),
    ]);
    expect((await checked(joined, true)).problems).toEqual(serving.warnings);
  });

  it('no certificate or no file is a problem; offline an absent file is not checked', async () => {
    expect((await checked('hello\n')).problems).toEqual([
      'CALLER_JWT_CA_FILE (callers.jwt.caFile): /ca.pem: no PEM certificate (-----BEGIN CERTIFICATE-----) in the file',
    ]);
    expect((await checked(undefined)).problems).toEqual([
      'CALLER_JWT_CA_FILE (callers.jwt.caFile): /ca.pem: cannot read (no such file)',
    ]);
    expect(await checked(undefined, true)).toEqual({
      problems: [],
      warnings: [],
      notes: ['CALLER_JWT_CA_FILE (callers.jwt.caFile): /ca.pem: not checked (no such file)'],
    });
  });
});
