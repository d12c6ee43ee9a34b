/**
 * The configuration schema: one entry per key, naming its environment variable, its parser
 * (parsers.ts and the `*-parsers.ts` beside it) and its default. Cross-key rules (https vs
 * `allowInsecureHttp`) live in `load.ts`, the credential source in `credential-checks.ts`.
 */
import {
  CLIENT_AUTHS,
  LOG_LEVELS,
  TOKEN_FORMATS,
  baseUrl,
  boolean,
  endpointUrl,
  fraction,
  integer,
  listen,
  oneOf,
  pathPrefixes,
  scopes,
  secret,
  shaped,
  text,
  LIST_SHAPE,
  STRING_SHAPE,
  type Parser,
  type Shape,
} from './parsers.js';

import { cacheRules } from './cache-parsers.js';
import { noProxy, proxyUrl } from './egress.js';
import { STORE_MODES, keyPrefix, sentinelPrimary, storeUrl } from './store-parsers.js';
import { CALLER_AUTHS, MAX_CALLER_RULES, callerRules, issuer, jwksUrl } from './caller-parsers.js';
import { callerHeader, callerName, callerPolicies, rateLimit } from './quota-parsers.js';
import {
  OTLP_PROTOCOLS,
  SAMPLERS,
  otlpEndpoint,
  otlpHeaders,
  resourceAttributes,
  samplerRatio,
} from './tracing-parsers.js';

export { INVALID, parseListen, parseValue, type Parser, type Report } from './parsers.js';

/**
 * One configuration key: its environment variable, the parser for its raw value and its built-in
 * default (the lowest layer; `undefined` when the key has none).
 */
export interface FieldSpec<T, D extends T | undefined = T | undefined> {
  env: string;
  parse: Parser<T>;
  /** Never echo the value, in any message. */
  secret: boolean;
  default: D;
  /** An older name still accepted (documented as an alias); setting both is a problem. */
  alias?: { key: string; env: string };
}

/**
 * What a parser of another module accepts from YAML, for config/oauth-sidecar.schema.json
 * (src/config/json-schema.ts); the parsers of parsers.ts describe themselves.
 */
function yaml<T>(shape: Shape, parse: Parser<T>): Parser<T> {
  return shaped(shape, parse);
}

const RATIO_SHAPE: Shape = { type: 'number', minimum: 0, maximum: 1 };
const CACHE_RULES_SHAPE: Shape = listOf({
  prefix: { type: 'string', pattern: '^/' },
  ttlSeconds: { type: 'integer', minimum: 1, maximum: 86_400 },
});
const CALLERS_SHAPE: Shape = listOf(
  {
    name: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$' },
    weight: { type: 'integer', minimum: 1 },
    priority: { enum: ['interactive', 'batch'] },
  },
  ['name', 'weight'],
);

/** `callers.rules`: `;`-joined rules in one string, or a list of such strings or of mappings. */
const CALLER_RULES_SHAPE: Shape = listOf(
  {
    subject: { type: 'string', pattern: '^[\\x21-\\x7e]{1,253}$' },
    caller: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$' },
    methods: {
      anyOf: [
        { type: 'string', pattern: '^(\\*|[A-Za-z]+)$' },
        { type: 'array', minItems: 1, items: { type: 'string', pattern: '^(\\*|[A-Za-z]+)$' } },
      ],
    },
    paths: { type: 'array', minItems: 1, items: { type: 'string', pattern: '^/' } },
  },
  ['subject', 'caller'],
  MAX_CALLER_RULES,
);

/** A comma list in one string, or a YAML list of such strings or of mappings with `properties`. */
function listOf(
  properties: Record<string, Shape>,
  required = Object.keys(properties),
  maxItems?: number,
): Shape {
  const mapping = { type: 'object', properties, required, additionalProperties: false };
  const items = { anyOf: [{ type: 'string' }, mapping] };
  return {
    anyOf: [
      { type: 'string' },
      { type: 'array', ...(maxItems === undefined ? {} : { maxItems }), items },
    ],
  };
}

function field<T>(env: string, parse: Parser<T>): FieldSpec<T, undefined>;
function field<T>(env: string, parse: Parser<T>, fallback: T): FieldSpec<T, T>;
function field<T>(env: string, parse: Parser<T>, fallback?: T): FieldSpec<T> {
  return { env, parse, secret: false, default: fallback };
}

/** A key whose value is never echoed; secrets have no default. */
function secretField<T>(env: string, parse: Parser<T>): FieldSpec<T, undefined> {
  return { env, parse, secret: true, default: undefined };
}

/** `spec`, also accepted under an older YAML key and variable. */
function aliased<T, D extends T | undefined>(
  spec: FieldSpec<T, D>,
  key: string,
  env: string,
): FieldSpec<T, D> {
  return { ...spec, alias: { key, env } };
}

/**
 * Every configuration key, by its dotted YAML path, with its default beside it
 * (docs/configuration.md). The YAML file may hold exactly these keys; anything else is reported as
 * unknown. `token.url` has no default here: it is derived from `upstream.baseUrl` in `load.ts`.
 */
export const FIELDS = {
  'upstream.baseUrl': field('UPSTREAM_BASE_URL', baseUrl()),
  // The API's only documented version prefix (docs/api-notes.md §9).
  'upstream.pathPrefixes': field('UPSTREAM_PATH_PREFIXES', pathPrefixes(), ['/v1.0/']),
  'upstream.caFile': field('UPSTREAM_CA_FILE', text('a path to a PEM CA bundle')),
  'upstream.timeoutMs': field('UPSTREAM_TIMEOUT_MS', integer(1, 600_000, 'milliseconds'), 30_000),
  // Plain http is refused unless explicitly allowed (docs/api-notes.md §5.1).
  'upstream.allowInsecureHttp': field('UPSTREAM_ALLOW_INSECURE_HTTP', boolean(), false),
  'upstream.http2': field('UPSTREAM_HTTP2', boolean(), false),
  'upstream.maxConnections': field(
    'UPSTREAM_MAX_CONNECTIONS',
    integer(1, 10_000, 'connections'),
    64,
  ),
  'upstream.bodyTimeoutMs': field(
    'UPSTREAM_BODY_TIMEOUT_MS',
    integer(1, 600_000, 'milliseconds'),
    30_000,
  ),
  'upstream.rateLimit': field('UPSTREAM_RATE_LIMIT', rateLimit()),
  'upstream.queueMs': field('UPSTREAM_QUEUE_MS', integer(0, 600_000, 'milliseconds'), 2_000),
  'upstream.maxCooldownSeconds': field(
    'UPSTREAM_MAX_COOLDOWN_SECONDS',
    integer(0, 86_400, 'seconds'),
    300,
  ),
  'token.url': field('TOKEN_URL', endpointUrl()),
  // The API's camelCase JSON format (docs/api-notes.md §4.1, format A).
  'token.format': field('TOKEN_REQUEST_FORMAT', oneOf(TOKEN_FORMATS), 'json'),
  'token.clientAuth': field('TOKEN_CLIENT_AUTH', oneOf(CLIENT_AUTHS), 'body'),
  'token.scopes': field('TOKEN_SCOPES', scopes(), []),
  'token.timeoutMs': field('TOKEN_TIMEOUT_MS', integer(1, 600_000, 'milliseconds'), 10_000),
  'token.waitMs': field('TOKEN_WAIT_MS', integer(0, 600_000, 'milliseconds'), 5_000),
  'token.refreshMarginSeconds': field(
    'TOKEN_REFRESH_MARGIN_SECONDS',
    integer(0, 86_400, 'seconds'),
    60,
  ),
  'token.refreshFraction': field('TOKEN_REFRESH_FRACTION', fraction(), 0.2),
  // token/schedule.ts RECOVERY_CAP_MS; at most the 60 s backoff cap of a process still serving.
  'token.recoveryBackoffCapMs': field(
    'TOKEN_RECOVERY_BACKOFF_CAP_MS',
    integer(1_000, 60_000, 'milliseconds'),
    8_000,
  ),
  'store.url': aliased(
    secretField('STORE_URL', yaml(STRING_SHAPE, storeUrl())),
    'token.store.url',
    'TOKEN_STORE_URL',
  ),
  'store.mode': field('STORE_MODE', oneOf(STORE_MODES), 'standalone'),
  'store.sentinelPrimary': field('STORE_SENTINEL_PRIMARY', sentinelPrimary()),
  'store.sentinelPassword': secretField('STORE_SENTINEL_PASSWORD', secret()),
  'store.keyPrefix': aliased(
    field('STORE_KEY_PREFIX', keyPrefix(), 'oauth-sidecar:'),
    'token.store.keyPrefix',
    'TOKEN_STORE_KEY_PREFIX',
  ),
  // docs/capacity.md "The model": a check per master per member; a large fleet may space them out.
  'store.healthCheckIntervalMs': field(
    'STORE_HEALTH_CHECK_INTERVAL_MS',
    integer(100, 60_000, 'milliseconds'),
    2_000,
  ),
  'credentials.clientId': secretField('CLIENT_ID', secret()),
  'credentials.clientSecret': secretField('CLIENT_SECRET', secret()),
  'credentials.clientIdFile': field('CLIENT_ID_FILE', text('a path to a file')),
  'credentials.clientSecretFile': field('CLIENT_SECRET_FILE', text('a path to a file')),
  'credentials.csvFile': field('CLIENT_CREDENTIALS_CSV', text('a path to a CSV file')),
  // Loopback, so only the pod itself can spend the credentials.
  'proxy.listen': field('PROXY_LISTEN', listen(), { host: '127.0.0.1', port: 8080 }),
  'proxy.http2': field('PROXY_HTTP2', boolean(), false),
  'proxy.maxInFlight': field('PROXY_MAX_IN_FLIGHT', integer(1, 100_000, 'requests'), 512),
  'proxy.maxPipelined': field('PROXY_MAX_PIPELINED', integer(1, 1_000, 'requests'), 8),
  'proxy.maxHeaders': field('PROXY_MAX_HEADERS', integer(1, 10_000, 'header fields'), 100),
  'proxy.bodyTimeoutMs': field(
    'PROXY_BODY_TIMEOUT_MS',
    integer(1, 600_000, 'milliseconds'),
    30_000,
  ),
  // Apache mod_reqtimeout's MinRate: a body slower than this on average, after its first 10 s, is
  // cut off with 408 (docs/design.md "Bounded work"). 0 turns the check off.
  'proxy.minBodyBytesPerSecond': field(
    'PROXY_MIN_BODY_BYTES_PER_SECOND',
    integer(0, 1_000_000_000, 'bytes per second'),
    500,
  ),
  // All interfaces, so the kubelet and Prometheus can reach the probes and metrics.
  'admin.listen': field('ADMIN_LISTEN', listen(), { host: '0.0.0.0', port: 9090 }),
  'log.level': field('LOG_LEVEL', oneOf(LOG_LEVELS), 'info'),
  'cache.rules': field('CACHE_RULES', yaml(CACHE_RULES_SHAPE, cacheRules()), []),
  'cache.maxBytes': field('CACHE_MAX_BYTES', integer(1_024, 2 ** 34, 'bytes'), 64 * 1024 * 1024),
  'cache.maxEntryBytes': field(
    'CACHE_MAX_ENTRY_BYTES',
    integer(1, 2 ** 31 - 1, 'bytes'),
    1024 * 1024,
  ),
  'cache.maxEntries': field('CACHE_MAX_ENTRIES', integer(1, 10_000_000, 'entries'), 10_000),
  'cache.shared': field('CACHE_SHARED', boolean(), false),
  'cache.maxSharedEntryBytes': field(
    'CACHE_MAX_SHARED_ENTRY_BYTES',
    integer(1, 16 * 1024 * 1024, 'bytes'),
    256 * 1024,
  ),
  // At most a week past freshness: a stale answer is the last good one, not an archive.
  'cache.staleIfErrorSeconds': field(
    'CACHE_STALE_IF_ERROR_SECONDS',
    integer(0, 7 * 86_400, 'seconds'),
    3_600,
  ),
  'cache.staleWhileRevalidateSeconds': field(
    'CACHE_STALE_WHILE_REVALIDATE_SECONDS',
    integer(0, 7 * 86_400, 'seconds'),
    0,
  ),
  'quota.caller': field('QUOTA_CALLER', yaml(STRING_SHAPE, callerName()), 'default'),
  'quota.callerHeader': field('QUOTA_CALLER_HEADER', yaml(STRING_SHAPE, callerHeader())),
  'quota.callers': field('QUOTA_CALLERS', yaml(CALLERS_SHAPE, callerPolicies()), []),
  // Off: a sidecar in a pod serves that pod; a shared gateway turns it on (docs/security.md).
  'callers.auth': field('CALLER_AUTH', oneOf(CALLER_AUTHS), 'none'),
  'callers.jwt.issuer': field('CALLER_JWT_ISSUER', issuer()),
  // Pomerium and Istio refuse an empty audience: a token minted for another service never passes.
  'callers.jwt.audience': field(
    'CALLER_JWT_AUDIENCE',
    text('an audience, e.g. oauth-sidecar'),
    'oauth-sidecar',
  ),
  'callers.jwt.jwksUrl': field('CALLER_JWT_JWKS_URL', jwksUrl()),
  'callers.jwt.jwksFile': field('CALLER_JWT_JWKS_FILE', text('a path to a JWKS file')),
  'callers.jwt.caFile': field('CALLER_JWT_CA_FILE', text('a path to a PEM CA bundle')),
  'callers.jwt.bearerFile': field('CALLER_JWT_BEARER_FILE', text('a path to a token file')),
  'callers.rules': field('CALLER_RULES', yaml(CALLER_RULES_SHAPE, callerRules()), []),
  // The variables curl, npm and undici read (docs/configuration.md "Egress proxy"); the lower-case
  // names are folded in by load.ts, the upper-case ones winning.
  'egress.proxy': secretField('HTTPS_PROXY', yaml(STRING_SHAPE, proxyUrl())),
  'egress.httpProxy': secretField('HTTP_PROXY', yaml(STRING_SHAPE, proxyUrl())),
  'egress.noProxy': field('NO_PROXY', yaml(LIST_SHAPE, noProxy()), []),
  // OpenTelemetry's own variables (docs/configuration.md "Tracing"): on when an endpoint is set.
  'tracing.endpoint': field('OTEL_EXPORTER_OTLP_ENDPOINT', yaml(STRING_SHAPE, otlpEndpoint())),
  'tracing.tracesEndpoint': field(
    'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    yaml(STRING_SHAPE, otlpEndpoint()),
  ),
  'tracing.protocol': field('OTEL_EXPORTER_OTLP_PROTOCOL', oneOf(OTLP_PROTOCOLS), 'http/protobuf'),
  'tracing.headers': secretField('OTEL_EXPORTER_OTLP_HEADERS', yaml(STRING_SHAPE, otlpHeaders())),
  'tracing.serviceName': field('OTEL_SERVICE_NAME', text('a service name'), 'oauth-sidecar'),
  'tracing.resourceAttributes': field(
    'OTEL_RESOURCE_ATTRIBUTES',
    yaml(STRING_SHAPE, resourceAttributes()),
  ),
  'tracing.sampler': field('OTEL_TRACES_SAMPLER', oneOf(SAMPLERS), 'parentbased_always_on'),
  'tracing.samplerArg': field('OTEL_TRACES_SAMPLER_ARG', yaml(RATIO_SHAPE, samplerRatio()), 1),
  'tracing.disabled': field('OTEL_SDK_DISABLED', boolean(), false),
  'tracing.maxQueueSize': field('OTEL_BSP_MAX_QUEUE_SIZE', integer(1, 1_000_000, 'spans'), 2_048),
  'tracing.maxExportBatchSize': field(
    'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
    integer(1, 1_000_000, 'spans'),
    512,
  ),
  'tracing.scheduleDelayMs': field(
    'OTEL_BSP_SCHEDULE_DELAY',
    integer(0, 600_000, 'milliseconds'),
    5_000,
  ),
  'tracing.exportTimeoutMs': field(
    'OTEL_BSP_EXPORT_TIMEOUT',
    integer(1, 600_000, 'milliseconds'),
    30_000,
  ),
  'tracing.recordQuery': field('TRACING_RECORD_QUERY', boolean(), false),
  // Off: other tools in the pod may share a prefix (docs/configuration.md "Unknown settings").
  strictConfig: field('STRICT_CONFIG', boolean(), false),
} as const;

export type FieldKey = keyof typeof FIELDS;

/** The parsed value of each key, `undefined` when no layer set it (or it was invalid). */
export type FieldValues = {
  [K in FieldKey]: (typeof FIELDS)[K] extends FieldSpec<infer T, infer _D> ? T | undefined : never;
};

/** The value of each key once its default applies: `undefined` only for keys with no default. */
export type ResolvedValues = {
  [K in FieldKey]: (typeof FIELDS)[K] extends FieldSpec<infer T, infer D>
    ? D extends undefined
      ? T | undefined
      : T
    : never;
};

/** `UPSTREAM_BASE_URL (upstream.baseUrl)`: how every problem line starts. */
export function label(key: FieldKey): string {
  return `${FIELDS[key].env} (${key})`;
}
