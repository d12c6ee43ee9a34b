/**
 * Configuration loading (docs/configuration.md): built-in defaults < YAML file < environment,
 * later wins key by key. Every problem is collected and thrown at once as one {@link ConfigError},
 * one line per problem naming the environment variable and the YAML key (docs/design.md "Practices" 7).
 */
import { inspect } from 'node:util';
import { ConfigError } from '../errors.js';
import { redactStoreUrl } from '../safe-text.js';
import {
  CredentialsFileError,
  readClientCredentials,
  readFailure,
  readTextFile,
  readValueFile,
  redacted,
  type ReadTextFile,
} from './credentials.js';
import { DEFAULT_TOKEN_PATH, EXAMPLE_BASE_URL } from './defaults.js';
import {
  FIELDS,
  label,
  parseValue,
  type FieldKey,
  type FieldValues,
  type ResolvedValues,
} from './schema.js';
import type { Config, CredentialsConfig } from './types.js';

export interface LoadConfigOptions {
  /** The environment (only `main.ts` reads `process.env`). Empty values count as unset. */
  env: Record<string, string | undefined>;
  /** YAML file from `--config`. */
  configFile?: string | undefined;
  /** Reads the config file, credential files and CA bundle; defaults to `fs.readFile(path, 'utf8')`. */
  readFile?: ReadTextFile | undefined;
}

const FIELD_KEYS = Object.keys(FIELDS) as FieldKey[];
const SECTIONS = [...new Set(FIELD_KEYS.map((key) => key.split('.')[0] as string))];
/** Mappings below a section (`token.store`): every dotted prefix of a key that is not a key. */
const SUBSECTIONS = new Set(
  FIELD_KEYS.flatMap((key) => {
    const parts = key.split('.');
    return parts.slice(2).map((_, i) => parts.slice(0, i + 2).join('.'));
  }),
);

/** A key's value from the layers, else its default from `FIELDS` (a fresh copy). */
function resolver(v: FieldValues) {
  return <K extends FieldKey>(key: K): ResolvedValues[K] =>
    (v[key] ?? structuredClone(FIELDS[key].default)) as ResolvedValues[K];
}

/**
 * Load and validate the configuration.
 * @throws ConfigError listing every problem, one line each; no secret value ever appears in it.
 */
export async function loadConfig(options: LoadConfigOptions): Promise<Config> {
  const readFile = options.readFile ?? readTextFile;
  const problems: string[] = [];

  const fromFile =
    options.configFile === undefined
      ? new Map<string, unknown>()
      : await readYamlLayer(options.configFile, readFile, problems);

  const values: Partial<Record<FieldKey, unknown>> = {};
  const invalid = new Set<FieldKey>();
  for (const key of FIELD_KEYS) {
    const spec = FIELDS[key];
    const envValue = options.env[spec.env];
    const raw = envValue !== undefined && envValue.trim() !== '' ? envValue : fromFile.get(key);
    if (raw === undefined || raw === null) continue;
    const result = parseValue<unknown>(spec.parse, raw);
    if (result.ok) {
      values[key] = result.value;
    } else {
      invalid.add(key);
      for (const problem of result.problems) problems.push(`${label(key)}: ${problem}`);
    }
  }
  const v = values as FieldValues;

  const get = resolver(v);
  const allowInsecureHttp = get('upstream.allowInsecureHttp');
  const httpHint = `http:// is refused unless ${label('upstream.allowInsecureHttp')} is true`;
  const insecureUnknown = invalid.has('upstream.allowInsecureHttp');
  const baseUrl = v['upstream.baseUrl'];
  if (baseUrl === undefined && !invalid.has('upstream.baseUrl')) {
    problems.push(`${label('upstream.baseUrl')}: required, e.g. ${EXAMPLE_BASE_URL}`);
  }
  if (baseUrl?.protocol === 'http:' && !allowInsecureHttp && !insecureUnknown) {
    problems.push(`${label('upstream.baseUrl')}: must use https:// (${httpHint})`);
  }
  const tokenUrl = v['token.url'];
  if (tokenUrl?.protocol === 'http:' && !allowInsecureHttp && !insecureUnknown) {
    problems.push(`${label('token.url')}: must use https:// (${httpHint})`);
  }

  checkCacheRules(get, invalid, problems);

  const credentials = credentialSource(v, invalid, problems);
  await Promise.all([
    credentials === undefined ? undefined : checkCredentialFiles(credentials, readFile, problems),
    v['upstream.caFile'] === undefined
      ? undefined
      : checkCaFile(v['upstream.caFile'], readFile, problems),
  ]);

  if (problems.length > 0 || baseUrl === undefined || credentials === undefined) {
    throw new ConfigError(problems);
  }
  const origin = baseUrl.origin;
  return {
    upstream: {
      baseUrl: origin,
      pathPrefixes: get('upstream.pathPrefixes'),
      caFile: get('upstream.caFile'),
      timeoutMs: get('upstream.timeoutMs'),
      allowInsecureHttp,
      http2: get('upstream.http2'),
      maxConnections: get('upstream.maxConnections'),
      bodyTimeoutMs: get('upstream.bodyTimeoutMs'),
      rateLimit: get('upstream.rateLimit'),
      queueMs: get('upstream.queueMs'),
      maxCooldownSeconds: get('upstream.maxCooldownSeconds'),
    },
    token: {
      url: tokenUrl?.href ?? `${origin}${DEFAULT_TOKEN_PATH}`,
      format: get('token.format'),
      clientAuth: get('token.clientAuth'),
      scopes: get('token.scopes'),
      timeoutMs: get('token.timeoutMs'),
      waitMs: get('token.waitMs'),
      refreshMarginSeconds: get('token.refreshMarginSeconds'),
      refreshFraction: get('token.refreshFraction'),
      store: storeConfig(get('token.store.url'), get('token.store.keyPrefix')),
    },
    credentials,
    proxy: {
      listen: get('proxy.listen'),
      http2: get('proxy.http2'),
      maxInFlight: get('proxy.maxInFlight'),
      maxPipelined: get('proxy.maxPipelined'),
      maxHeaders: get('proxy.maxHeaders'),
      bodyTimeoutMs: get('proxy.bodyTimeoutMs'),
      minBodyBytesPerSecond: get('proxy.minBodyBytesPerSecond'),
    },
    admin: { listen: get('admin.listen') },
    log: { level: get('log.level') },
    cache: {
      rules: get('cache.rules'),
      maxBytes: get('cache.maxBytes'),
      maxEntryBytes: get('cache.maxEntryBytes'),
    },
  };
}

/** `token.store`: the URL may hold a password, so serialising the object never shows it. */
function storeConfig(url: string | undefined, keyPrefix: string): Config['token']['store'] {
  const store = { url, keyPrefix };
  const safe = (): object => ({
    url: url === undefined ? undefined : redactStoreUrl(url),
    keyPrefix,
  });
  Object.defineProperty(store, 'toJSON', { value: safe, enumerable: false });
  Object.defineProperty(store, inspect.custom, { value: safe, enumerable: false });
  return store;
}

/**
 * Cross-key rules of the response cache: a rule outside every forwarded prefix would never apply,
 * and an entry limit above the total would store nothing it promises.
 */
function checkCacheRules(
  get: ReturnType<typeof resolver>,
  invalid: ReadonlySet<FieldKey>,
  problems: string[],
): void {
  if (!invalid.has('upstream.pathPrefixes')) {
    const prefixes = get('upstream.pathPrefixes');
    for (const rule of get('cache.rules')) {
      if (!prefixes.some((prefix) => rule.prefix.startsWith(prefix))) {
        problems.push(
          `${label('cache.rules')}: the rule for ${JSON.stringify(rule.prefix)} lies outside every forwarded prefix (${prefixes.join(', ')}) and would never apply`,
        );
      }
    }
  }
  if (
    !invalid.has('cache.maxBytes') &&
    !invalid.has('cache.maxEntryBytes') &&
    get('cache.maxEntryBytes') > get('cache.maxBytes')
  ) {
    problems.push(
      `${label('cache.maxEntryBytes')}: must not exceed ${label('cache.maxBytes')} (${get('cache.maxBytes')})`,
    );
  }
}

/**
 * The stderr text for bad configuration: a headline, then one problem per line. `main.ts` prints
 * it and exits with `EXIT_CONFIG` (78).
 */
export function formatConfigProblems(error: ConfigError): string {
  const count = error.problems.length;
  const lines = error.problems.map((problem) => `  - ${problem}`);
  return [
    `oauth-sidecar: invalid configuration (${count} problem${count === 1 ? '' : 's'}):`,
    ...lines,
  ].join('\n');
}

/** Read and flatten the YAML file into `section.key` → raw value; problems name the file. */
async function readYamlLayer(
  file: string,
  readFile: ReadTextFile,
  problems: string[],
): Promise<Map<string, unknown>> {
  const values = new Map<string, unknown>();
  let text: string;
  try {
    text = await readFile(file);
  } catch (error) {
    problems.push(`--config ${file}: cannot read configuration file (${readFailure(error)})`);
    return values;
  }
  // Loaded only when a --config file is given: the parser is ~10 MiB of RSS a sidecar without
  // one never needs (docs/benchmarks.md, footprint).
  const { LineCounter, parseDocument } = await import('yaml');
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter });
  const [firstError] = doc.errors;
  if (firstError !== undefined) {
    // prettyErrors is off: a pretty message carries a source excerpt, which may hold a secret.
    const reason = (firstError.message.split('\n')[0] ?? '').replace(/:\s*$/, '');
    const where = lineCounter.linePos(firstError.pos[0]);
    const at = ` at line ${where.line}, column ${where.col}`;
    problems.push(`--config ${file}: invalid YAML${at}: ${reason}`);
    return values;
  }
  const root: unknown = doc.toJS();
  if (root === null || root === undefined) return values;
  if (!isMapping(root)) {
    problems.push(`--config ${file}: must be a YAML mapping with sections ${SECTIONS.join(', ')}`);
    return values;
  }
  for (const [section, body] of Object.entries(root)) {
    if (!SECTIONS.includes(section)) {
      problems.push(unknownKey(section, file));
      continue;
    }
    if (body === null || body === undefined) continue;
    if (!isMapping(body)) {
      problems.push(
        `${section} (in ${file}): must be a mapping of keys, e.g. ${section}.<key>: value`,
      );
      continue;
    }
    flatten(section, body, file, values, problems);
  }
  return values;
}

/** Collect `prefix.key` values of one mapping, descending into subsections (`token.store`). */
function flatten(
  prefix: string,
  body: Record<string, unknown>,
  file: string,
  values: Map<string, unknown>,
  problems: string[],
): void {
  for (const [key, value] of Object.entries(body)) {
    const dotted = `${prefix}.${key}`;
    if (dotted in FIELDS) values.set(dotted, value);
    else if (SUBSECTIONS.has(dotted) && isMapping(value)) {
      flatten(dotted, value, file, values, problems);
    } else if (SUBSECTIONS.has(dotted) && (value === null || value === undefined)) continue;
    else problems.push(unknownKey(dotted, file));
  }
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `upstream.baseURL: unknown key (in FILE), did you mean upstream.baseUrl?` */
function unknownKey(dotted: string, file: string): string {
  const suggestion = suggest(dotted);
  const hint = suggestion === undefined ? '' : `, did you mean ${suggestion}?`;
  return `${dotted}: unknown key (in ${file})${hint}`;
}

function suggest(dotted: string): string | undefined {
  // An environment variable name or a flat dotted key used as a top-level YAML key.
  const byEnv = FIELD_KEYS.find((key) => FIELDS[key].env === dotted);
  if (byEnv !== undefined) return byEnv;
  if (dotted in FIELDS) {
    const [section, key] = dotted.split('.');
    return `${dotted} written nested (${section ?? ''}: { ${key ?? ''}: ... })`;
  }
  const candidates = dotted.includes('.') ? FIELD_KEYS : SECTIONS;
  const lower = dotted.toLowerCase();
  let best: { key: string; distance: number } | undefined;
  for (const key of candidates) {
    const distance = editDistance(lower, key.toLowerCase());
    if (distance <= 2 && (best === undefined || distance < best.distance)) best = { key, distance };
  }
  return best?.key;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

const SOURCES = {
  inline: ['credentials.clientId', 'credentials.clientSecret'],
  files: ['credentials.clientIdFile', 'credentials.clientSecretFile'],
  csv: ['credentials.csvFile'],
} as const satisfies Record<CredentialsConfig['source'], readonly FieldKey[]>;

const ALL_SOURCES =
  'CLIENT_ID + CLIENT_SECRET, CLIENT_ID_FILE + CLIENT_SECRET_FILE, or CLIENT_CREDENTIALS_CSV (credentials.*)';

/** Exactly one complete credential source; `undefined` (with problems) otherwise. */
function credentialSource(
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

/** Load-time check that the credential files can be read now, each fault on its own line. */
async function checkCredentialFiles(
  credentials: CredentialsConfig,
  readFile: ReadTextFile,
  problems: string[],
): Promise<void> {
  const attempt = async (key: FieldKey, read: () => Promise<unknown>): Promise<void> => {
    try {
      await read();
    } catch (error) {
      if (!(error instanceof CredentialsFileError)) throw error;
      problems.push(`${label(key)}: ${error.path}: ${error.fault}`);
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

async function checkCaFile(
  path: string,
  readFile: ReadTextFile,
  problems: string[],
): Promise<void> {
  let text: string;
  try {
    text = await readFile(path);
  } catch (error) {
    problems.push(`${label('upstream.caFile')}: ${path}: cannot read (${readFailure(error)})`);
    return;
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----')) {
    problems.push(
      `${label('upstream.caFile')}: ${path}: no PEM certificate (-----BEGIN CERTIFICATE-----) in the file`,
    );
  }
}
