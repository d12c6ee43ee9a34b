/**
 * Load-time checks of where the credentials and the CA bundle come from: exactly one complete
 * credential source, and the files it names readable now (docs/configuration.md "Credentials").
 * Each fault is one line of the configuration error.
 */
import { X509Certificate } from 'node:crypto';
import {
  CredentialsFileError,
  readClientCredentials,
  readFailure,
  readValueFile,
  redacted,
  type ReadTextFile,
} from './credentials.js';
import { FIELDS, label, type FieldKey, type FieldValues } from './schema.js';
import type { CredentialsConfig } from './types.js';

const SOURCES = {
  inline: ['credentials.clientId', 'credentials.clientSecret'],
  files: ['credentials.clientIdFile', 'credentials.clientSecretFile'],
  csv: ['credentials.csvFile'],
} as const satisfies Record<CredentialsConfig['source'], readonly FieldKey[]>;

const ALL_SOURCES =
  'CLIENT_ID + CLIENT_SECRET, CLIENT_ID_FILE + CLIENT_SECRET_FILE, or CLIENT_CREDENTIALS_CSV (credentials.*)';

/** Exactly one complete credential source; `undefined` (with problems) otherwise. */
export function credentialSource(
  v: FieldValues,
  invalid: ReadonlySet<FieldKey>,
  problems: string[],
): CredentialsConfig | undefined {
  const present = (key: FieldKey): boolean => v[key] !== undefined || invalid.has(key);
  const configured = (Object.keys(SOURCES) as (keyof typeof SOURCES)[]).filter((source) =>
    SOURCES[source].some(present),
  );
  if (configured.length === 0) {
    problems.push(`${ALL_SOURCES}: one credential source is required, none is set`);
    return undefined;
  }
  if (configured.length > 1) {
    const found = configured
      .map(
        (source) =>
          `${source} (${SOURCES[source]
            .filter(present)
            .map((k) => FIELDS[k].env)
            .join(', ')})`,
      )
      .join(' and ');
    problems.push(`${ALL_SOURCES}: exactly one credential source may be set, found ${found}`);
  }
  for (const source of configured) {
    const keys: readonly FieldKey[] = SOURCES[source];
    const [first, second] = keys;
    if (first === undefined || second === undefined) continue;
    if (present(first) && !present(second)) {
      problems.push(`${label(second)}: required with ${label(first)}`);
    } else if (!present(first) && present(second)) {
      problems.push(`${label(first)}: required with ${label(second)}`);
    }
  }
  if (configured.length > 1) return undefined;
  const clientId = v['credentials.clientId'];
  const clientSecret = v['credentials.clientSecret'];
  const clientIdFile = v['credentials.clientIdFile'];
  const clientSecretFile = v['credentials.clientSecretFile'];
  const csvFile = v['credentials.csvFile'];
  switch (configured[0]) {
    case 'inline':
      return clientId !== undefined && clientSecret !== undefined
        ? redacted<CredentialsConfig>({ source: 'inline', clientId, clientSecret })
        : undefined;
    case 'files':
      return clientIdFile !== undefined && clientSecretFile !== undefined
        ? { source: 'files', clientIdFile, clientSecretFile }
        : undefined;
    case 'csv':
      return csvFile !== undefined ? { source: 'csv', csvFile } : undefined;
    default:
      return undefined;
  }
}

/**
 * What a file that does not exist is: a problem (serving, `check`), or, for `check --offline` in a
 * configuration CI where no secret is mounted, a line naming it as not checked.
 */
export type AbsentFiles =
  { kind: 'problem' } | { kind: 'not-checked'; note: (line: string) => void };

const isAbsent = (error: unknown): boolean =>
  (error as { code?: unknown } | null)?.code === 'ENOENT';

/** Load-time check that the credential files can be read now, each fault on its own line. */
export async function checkCredentialFiles(
  credentials: CredentialsConfig,
  readFile: ReadTextFile,
  problems: string[],
  absent: AbsentFiles = { kind: 'problem' },
): Promise<void> {
  const attempt = async (key: FieldKey, read: () => Promise<unknown>): Promise<void> => {
    try {
      await read();
    } catch (error) {
      if (!(error instanceof CredentialsFileError)) throw error;
      if (absent.kind === 'not-checked' && isAbsent(error.cause)) {
        absent.note(`${label(key)}: ${error.path}: not checked (no such file)`);
      } else problems.push(`${label(key)}: ${error.path}: ${error.fault}`);
    }
  };
  switch (credentials.source) {
    case 'inline':
      return;
    case 'files':
      await Promise.all([
        attempt('credentials.clientIdFile', () =>
          readValueFile(readFile, credentials.clientIdFile, 'client id file'),
        ),
        attempt('credentials.clientSecretFile', () =>
          readValueFile(readFile, credentials.clientSecretFile, 'client secret file'),
        ),
      ]);
      return;
    case 'csv':
      await attempt('credentials.csvFile', () => readClientCredentials(credentials, readFile));
      return;
  }
}

/**
 * The CA bundle (`upstream.caFile`) is readable and holds a PEM certificate (else a problem); a
 * certificate in it that TLS would not read is a warning when serving (pushed to `warnings`) and a
 * problem for `check --offline`, which is strict as it is with unknown settings.
 */
export async function checkCaFile(
  path: string,
  readFile: ReadTextFile,
  problems: string[],
  warnings: string[],
  absent: AbsentFiles = { kind: 'problem' },
  key: 'upstream.caFile' | 'callers.jwt.caFile' = 'upstream.caFile',
): Promise<void> {
  let text: string;
  try {
    text = await readFile(path);
  } catch (error) {
    if (absent.kind === 'not-checked' && isAbsent(error)) {
      absent.note(`${label(key)}: ${path}: not checked (no such file)`);
    } else {
      problems.push(`${label(key)}: ${path}: cannot read (${readFailure(error)})`);
    }
    return;
  }
  if (!text.includes(BEGIN)) {
    problems.push(`${label(key)}: ${path}: no PEM certificate (${BEGIN}) in the file`);
    return;
  }
  (absent.kind === 'not-checked' ? problems : warnings).push(
    ...unreadableCertificates(text).map(
      (fault) =>
        `${label(key)}: ${path}: ${fault}; the bundle may be trusted in part or not at all`,
    ),
  );
}

const BEGIN = '-----BEGIN CERTIFICATE-----';
const END = '-----END CERTIFICATE-----';

/**
 * What TLS (OpenSSL's PEM reader) would stumble on in a PEM bundle, one line per certificate:
 * a BEGIN or END line that is not a line of its own (`cat a.pem b.pem` when a.pem has no final
 * newline: Node then trusts none of the file), or a block that is not a certificate.
 */
export function unreadableCertificates(text: string): string[] {
  const faults: string[] = [];
  const starts = [...text.matchAll(/-----BEGIN CERTIFICATE-----/g)].map((match) => match.index);
  for (const [n, start] of starts.entries()) {
    const which = `certificate ${n + 1} of ${starts.length}`;
    const end = text.indexOf(END, start);
    if (start > 0 && text[start - 1] !== '\n') {
      faults.push(
        `${which}: its BEGIN line does not start a line (a file without a final newline joined to another?)`,
      );
    } else if (end < 0 || end > (starts[n + 1] ?? Infinity)) {
      faults.push(`${which}: no END line before the next certificate`);
    } else if (!/^[ \t]*(\r?\n|$)/.test(text.slice(end + END.length))) {
      faults.push(`${which}: text after its END line on the same line`);
    } else {
      try {
        new X509Certificate(text.slice(start, end + END.length));
      } catch {
        faults.push(`${which}: not a readable X.509 certificate`);
      }
    }
  }
  return faults;
}
