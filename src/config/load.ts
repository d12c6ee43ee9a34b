/**
 * Configuration loading (docs/configuration.md): built-in defaults < YAML file < environment,
 * later wins key by key. Every problem is collected and thrown at once as one {@link ConfigError},
 * one line per problem naming the environment variable and the YAML key (docs/design.md "Practices" 7).
 */
import { inspect } from 'node:util';
import { ConfigError } from '../errors.js';
import {
  checkCaFile,
  checkCredentialFiles,
  credentialSource,
  type AbsentFiles,
} from './credential-checks.js';
import { readTextFile, type ReadTextFile } from './credentials.js';
import { foldProxyVariables, shownProxy } from './egress.js';
import { DEFAULT_TOKEN_PATH, EXAMPLE_BASE_URL } from './defaults.js';
import { describeUnknown, unknownSettings } from './unknown-settings.js';
import { aliasOf, readYamlLayer } from './yaml-layer.js';
import { checkStore, storeConfig } from './store-config.js';
import { callersConfig, checkCallers } from './caller-config.js';
import {
  FIELDS,
  label,
  parseValue,
  type FieldKey,
  type FieldValues,
  type ResolvedValues,
} from './schema.js';
import type { Config, CredentialsConfig, TracingConfig } from './types.js';

export interface LoadConfigOptions {
  /** The environment (only `main.ts` reads `process.env`). Empty values count as unset. */
  env: Record<string, string | undefined>;
  /** YAML file from `--config`. */
  configFile?: string | undefined;
  /** Reads the config file, credential files and CA bundle; defaults to `fs.readFile(path, 'utf8')`. */
  readFile?: ReadTextFile | undefined;
  /**
   * `check --offline`, for a configuration CI with no secret mounted: a credential or CA file
   * that does not exist is named through `note` as not checked instead of being a problem, and an
   * unknown setting is a problem (as with `strictConfig`), not a warning. Default: serving.
   */
  strictness?:
    { kind: 'serving' } | { kind: 'offline-check'; note: (line: string) => void } | undefined;
}

const FIELD_KEYS = Object.keys(FIELDS) as FieldKey[];

/** A key's value from the layers, else its default from `FIELDS` (a fresh copy). */
function resolver(v: FieldValues) {
  return <K extends FieldKey>(key: K): ResolvedValues[K] =>
    (v[key] ?? structuredClone(FIELDS[key].default)) as ResolvedValues[K];
}
type Get = ReturnType<typeof resolver>;

/** The parsed layers: values, keys found invalid, and where each problem's value came from. */
interface Layers {
  v: FieldValues;
  invalid: Set<FieldKey>;
  /** Keys whose value came from the YAML file: their problems name the file, not the variable. */
  fileKeys: FieldKey[];
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
  const layers = parseLayers(foldProxyVariables(options.env), fromFile, problems);
  const { v, invalid } = layers;
  const get = resolver(v);
  checkSchemes(v, get, invalid, problems);
  checkCacheRules(get, invalid, problems);
  checkStore(get, invalid, problems);
  checkCallers(get, invalid, problems);
  const unknown = unknownSettings(options.env).map(describeUnknown);
  const strictness = options.strictness ?? { kind: 'serving' };
  const offline = strictness.kind === 'offline-check';
  // Strict when asked (or in a configuration CI), else a warning: other tools in the pod may
  // share a prefix.
  const strict = get('strictConfig') || offline;
  if (strict) problems.push(...unknown);
  const absent: AbsentFiles = offline
    ? { kind: 'not-checked', note: strictness.note }
    : { kind: 'problem' };
  const credentials = credentialSource(v, invalid, problems);
  const fileWarnings: string[] = [];
  await Promise.all([
    credentials === undefined
      ? undefined
      : checkCredentialFiles(credentials, readFile, problems, absent),
    v['upstream.caFile'] === undefined
      ? undefined
      : checkCaFile(v['upstream.caFile'], readFile, problems, fileWarnings, absent),
    v['callers.jwt.caFile'] === undefined
      ? undefined
      : checkCaFile(
          v['callers.jwt.caFile'],
          readFile,
          problems,
          fileWarnings,
          absent,
          'callers.jwt.caFile',
        ),
  ]);
  const baseUrl = v['upstream.baseUrl'];
  if (problems.length > 0 || baseUrl === undefined || credentials === undefined) {
    throw new ConfigError(namingTheFile(problems, layers.fileKeys, options.configFile));
  }
  const config = buildConfig(get, baseUrl.origin, v['token.url']?.href, credentials);
  const warnings = [...(strict ? [] : unknown), ...fileWarnings];
  return warnings.length === 0 ? config : { ...config, warnings };
}

/** Environment over file, key by key; an alias counts as its key, and both set is a problem. */
function parseLayers(
  env: LoadConfigOptions['env'],
  fromFile: ReadonlyMap<string, unknown>,
  problems: string[],
): Layers {
  const values: Partial<Record<FieldKey, unknown>> = {};
  const invalid = new Set<FieldKey>();
  const fileKeys: FieldKey[] = [];
  const set = (value: string | undefined): value is string =>
    value !== undefined && value.trim() !== '';
  for (const key of FIELD_KEYS) {
    const spec = FIELDS[key];
    const alias = aliasOf(key);
    const envName = alias !== undefined && set(env[alias.env]) ? alias.env : spec.env;
    if (alias !== undefined && set(env[spec.env]) && set(env[alias.env])) {
      problems.push(`${label(key)}: both ${spec.env} and its alias ${alias.env} are set; keep one`);
    }
    if (alias !== undefined && fromFile.has(key) && fromFile.has(alias.key)) {
      problems.push(
        `${label(key)}: both ${key} and its alias ${alias.key} are in the file; keep one`,
      );
    }
    const fromEnv = set(env[envName]);
    const raw = fromEnv ? env[envName] : (fromFile.get(key) ?? fromFile.get(alias?.key ?? key));
    if (raw === undefined || raw === null) continue;
    if (!fromEnv) fileKeys.push(key);
    const result = parseValue<unknown>(spec.parse, raw);
    if (result.ok) {
      values[key] = result.value;
      continue;
    }
    invalid.add(key);
    const named = envName === spec.env ? label(key) : `${envName} (${alias?.key ?? key})`;
    for (const problem of result.problems) problems.push(`${named}: ${problem}`);
  }
  return { v: values as FieldValues, invalid, fileKeys };
}

/** `http://` only where `upstream.allowInsecureHttp` says so; the base URL is required. */
function checkSchemes(
  v: FieldValues,
  get: Get,
  invalid: ReadonlySet<FieldKey>,
  problems: string[],
): void {
  const allowed = get('upstream.allowInsecureHttp') || invalid.has('upstream.allowInsecureHttp');
  const httpHint = `http:// is refused unless ${label('upstream.allowInsecureHttp')} is true`;
  const baseUrl = v['upstream.baseUrl'];
  if (baseUrl === undefined && !invalid.has('upstream.baseUrl')) {
    problems.push(`${label('upstream.baseUrl')}: required, e.g. ${EXAMPLE_BASE_URL}`);
  }
  if (baseUrl?.protocol === 'http:' && !allowed) {
    problems.push(`${label('upstream.baseUrl')}: must use https:// (${httpHint})`);
  }
  if (v['token.url']?.protocol === 'http:' && !allowed) {
    problems.push(`${label('token.url')}: must use https:// (${httpHint})`);
  }
}

function upstreamConfig(get: Get, origin: string): Config['upstream'] {
  return {
    baseUrl: origin,
    pathPrefixes: get('upstream.pathPrefixes'),
    caFile: get('upstream.caFile'),
    timeoutMs: get('upstream.timeoutMs'),
    allowInsecureHttp: get('upstream.allowInsecureHttp'),
    http2: get('upstream.http2'),
    maxConnections: get('upstream.maxConnections'),
    bodyTimeoutMs: get('upstream.bodyTimeoutMs'),
    rateLimit: get('upstream.rateLimit'),
    queueMs: get('upstream.queueMs'),
    maxCooldownSeconds: get('upstream.maxCooldownSeconds'),
  };
}

function cacheConfig(get: Get): Config['cache'] {
  return {
    rules: get('cache.rules'),
    maxBytes: get('cache.maxBytes'),
    maxEntryBytes: get('cache.maxEntryBytes'),
    maxEntries: get('cache.maxEntries'),
    shared: get('cache.shared'),
    maxSharedEntryBytes: get('cache.maxSharedEntryBytes'),
    staleIfErrorSeconds: get('cache.staleIfErrorSeconds'),
    staleWhileRevalidateSeconds: get('cache.staleWhileRevalidateSeconds'),
  };
}

function buildConfig(
  get: Get,
  origin: string,
  tokenUrl: string | undefined,
  credentials: CredentialsConfig,
): Config {
  return {
    upstream: upstreamConfig(get, origin),
    token: {
      url: tokenUrl ?? `${origin}${DEFAULT_TOKEN_PATH}`,
      format: get('token.format'),
      clientAuth: get('token.clientAuth'),
      scopes: get('token.scopes'),
      timeoutMs: get('token.timeoutMs'),
      waitMs: get('token.waitMs'),
      refreshMarginSeconds: get('token.refreshMarginSeconds'),
      refreshFraction: get('token.refreshFraction'),
      recoveryBackoffCapMs: get('token.recoveryBackoffCapMs'),
    },
    store: storeConfig(get),
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
    cache: cacheConfig(get),
    egress: egressConfig(get('egress.proxy'), get('egress.httpProxy'), get('egress.noProxy')),
    tracing: tracingConfig(get),
    quota: {
      caller: get('quota.caller'),
      callerHeader: get('quota.callerHeader'),
      callers: get('quota.callers'),
    },
    callers: callersConfig(get),
  };
}

/**
 * A problem about a value the YAML file set starts `credentials.csvFile (in FILE):` instead of
 * `CLIENT_CREDENTIALS_CSV (credentials.csvFile):`: the operator looks where the value came from.
 */
function namingTheFile(
  problems: readonly string[],
  fileKeys: readonly FieldKey[],
  file: string | undefined,
): string[] {
  if (file === undefined || fileKeys.length === 0) return [...problems];
  return problems.map((problem) => {
    const key = fileKeys.find((candidate) => problem.startsWith(`${label(candidate)}:`));
    return key === undefined
      ? problem
      : `${key} (in ${file}, or ${FIELDS[key].env})${problem.slice(label(key).length)}`;
  });
}

/** Tracing is on when an endpoint is set and `OTEL_SDK_DISABLED` is not true. */
function tracingConfig(get: Get): TracingConfig | undefined {
  const traces = get('tracing.tracesEndpoint');
  const base = get('tracing.endpoint');
  if (get('tracing.disabled') || (traces === undefined && base === undefined)) return undefined;
  const headers = get('tracing.headers') ?? {};
  const config: TracingConfig = {
    url: traces ?? `${base!.replace(/\/+$/, '')}/v1/traces`,
    protocol: get('tracing.protocol'),
    headers,
    serviceName: get('tracing.serviceName'),
    resourceAttributes: get('tracing.resourceAttributes') ?? {},
    sampler: get('tracing.sampler'),
    samplerArg: get('tracing.samplerArg'),
    maxQueueSize: get('tracing.maxQueueSize'),
    maxExportBatchSize: Math.min(get('tracing.maxExportBatchSize'), get('tracing.maxQueueSize')),
    scheduleDelayMs: get('tracing.scheduleDelayMs'),
    exportTimeoutMs: get('tracing.exportTimeoutMs'),
    recordQuery: get('tracing.recordQuery'),
  };
  // The headers may hold an API key: serialising the config never shows their values.
  const safe = (): object => ({ ...config, headers: Object.keys(headers) });
  Object.defineProperty(config, 'toJSON', { value: safe, enumerable: false });
  Object.defineProperty(config, inspect.custom, { value: safe, enumerable: false });
  return config;
}

/** `egress`: the proxy URLs may hold a user and password, so serialising never shows them. */
function egressConfig(
  proxy: string | undefined,
  httpProxy: string | undefined,
  noProxy: string[],
): Config['egress'] {
  const egress = { proxy, httpProxy, noProxy };
  const safe = (): object => ({
    proxy: proxy === undefined ? undefined : shownProxy(proxy),
    httpProxy: httpProxy === undefined ? undefined : shownProxy(httpProxy),
    noProxy,
  });
  Object.defineProperty(egress, 'toJSON', { value: safe, enumerable: false });
  Object.defineProperty(egress, inspect.custom, { value: safe, enumerable: false });
  return egress;
}

/**
 * Cross-key rules of the response cache: a rule outside every forwarded prefix would never apply,
 * and an entry limit above the total would store nothing it promises.
 */
function checkCacheRules(get: Get, invalid: ReadonlySet<FieldKey>, problems: string[]): void {
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
  if (get('cache.shared') && get('store.url') === undefined) {
    problems.push(
      `${label('cache.shared')}: needs a store (${label('store.url')}) to share entries through`,
    );
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
