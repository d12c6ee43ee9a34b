/** The validated configuration every other module receives (docs/configuration.md). */
/** `egress.*` of the validated configuration. */
export interface EgressConfig {
  /** For `https://` origins (`HTTPS_PROXY` / `https_proxy` / `egress.proxy`); may hold a user and password. */
  proxy: string | undefined;
  /** For an `http://` origin only (`HTTP_PROXY` / `http_proxy`: local tests). */
  httpProxy: string | undefined;
  /** `NO_PROXY` entries, lower case, validated. */
  noProxy: string[];
}

export interface HostPort {
  host: string;
  port: number;
}

export type TokenFormat = 'json' | 'form';
export type ClientAuth = 'body' | 'basic';
/** How the store is reached (docs/token-store.md "Redis Cluster and Sentinel"). */
export type StoreMode = 'standalone' | 'cluster' | 'sentinel';
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** `upstream.rateLimit`: at most `count` requests per `periodMs` (a token bucket of `count`). */
export interface RateLimit {
  count: number;
  periodMs: number;
}

/** One `cache.rules` entry: GET answers under `prefix` are cached for up to `ttlSeconds`. */
export interface CacheRule {
  prefix: string;
  ttlSeconds: number;
}

/** Who goes first among callers waiting for a rate-limit slot. */
export type Priority = 'interactive' | 'batch';

/** A caller's weight in the fair share and its priority. */
export interface CallerPolicy {
  weight: number;
  priority: Priority;
}

/** One `quota.callers` entry. */
export interface NamedCallerPolicy extends CallerPolicy {
  name: string;
}

/**
 * One of `callers.rules`: a verified caller whose `sub` matches `subject` (exactly, or as a
 * prefix when written with a trailing `*`) is the quota caller `caller`, limited to `methods` and
 * `paths` when given (docs/configuration.md "Caller identity").
 */
export interface CallerRule {
  /** Without the trailing `*` of a prefix. */
  subject: string;
  match: 'exact' | 'prefix';
  caller: string;
  /** Upper case; undefined: any method. */
  methods: string[] | undefined;
  /** Path prefixes, each inside `upstream.pathPrefixes`; undefined: every forwarded path. */
  paths: string[] | undefined;
}

/** Where the callers' verification keys come from. */
export type CallerKeySource =
  { kind: 'url'; url: string } | { kind: 'discovery' } | { kind: 'file'; file: string };

/** `callers.auth: jwt`: what a caller's token must satisfy and where its keys come from. */
export interface CallerJwtConfig {
  issuer: string;
  audience: string;
  keys: CallerKeySource;
  /** PEM CA bundle trusted (besides the system roots) for the JWKS and discovery URLs. */
  caFile: string | undefined;
  /** A token presented when fetching the JWKS, re-read at each fetch. */
  bearerFile: string | undefined;
}

/** `callers.*`: `none` (every request is the sidecar's own caller's) or verified callers. */
export type CallersConfig =
  { auth: 'none' } | { auth: 'jwt'; jwt: CallerJwtConfig; rules: CallerRule[] };

export type CredentialsConfig =
  | { source: 'inline'; clientId: string; clientSecret: string }
  | { source: 'files'; clientIdFile: string; clientSecretFile: string }
  | { source: 'csv'; csvFile: string };

/** A client id and secret, as read from the configured source. */
export interface ClientCredentials {
  clientId: string;
  clientSecret: string;
}

/** Reads the client credentials; called before every client-credentials grant so rotations apply. */
export type CredentialsReader = () => Promise<ClientCredentials>;

export interface Config {
  upstream: {
    /** Origin only, no trailing slash: `https://host[:port]`. */
    baseUrl: string;
    /** Each starts and ends with `/`. */
    pathPrefixes: string[];
    caFile: string | undefined;
    timeoutMs: number;
    allowInsecureHttp: boolean;
    /** Offer HTTP/2 to the upstream through ALPN. */
    http2: boolean;
    /** Upstream connections per origin; further requests wait for a free one. */
    maxConnections: number;
    /** Longest pause inside the upstream's answer body; then the client connection is aborted. */
    bodyTimeoutMs: number;
    /** Most requests sent upstream per period; `undefined`: no limit. */
    rateLimit: RateLimit | undefined;
    /** Longest wait for a rate-limit slot; then 429 `rate_limited`. */
    queueMs: number;
    /** Cap on a cooldown taken from the API's `Retry-After` (0: no cooldowns). */
    maxCooldownSeconds: number;
  };
  token: {
    url: string;
    format: TokenFormat;
    clientAuth: ClientAuth;
    scopes: string[];
    timeoutMs: number;
    waitMs: number;
    refreshMarginSeconds: number;
    refreshFraction: number;
    /** Longest wait between token attempts while no valid token is held (backoff and `Retry-After`). */
    recoveryBackoffCapMs: number;
  };
  store: {
    /** `redis://` / `rediss://` URL of the fleet's shared store (may hold a password); unset: none. */
    url: string | undefined;
    /** `standalone`: one server; `cluster`: the URL's hosts are seed nodes; `sentinel`: the sentinels. */
    mode: StoreMode;
    /** With `sentinel`: the name of the primary the sentinels watch. */
    sentinelPrimary: string | undefined;
    /** The sentinels' own password, if they ask for one (secret). */
    sentinelPassword: string | undefined;
    keyPrefix: string;
    /** How often the store's health check runs (one script on each node written to). */
    healthCheckIntervalMs: number;
  };
  credentials: CredentialsConfig;
  proxy: {
    listen: HostPort;
    /** Serve h2c (prior knowledge) on the proxy listener instead of HTTP/1.1. */
    http2: boolean;
    /** Proxied requests in progress at once (HTTP/1.1 and h2 together); then 503 `overloaded`. */
    maxInFlight: number;
    /** Requests of one HTTP/1.1 connection in progress at once; the rest stay unread. */
    maxPipelined: number;
    /** Inbound header fields per request; more: 431 `request_headers_too_large`. */
    maxHeaders: number;
    /** Longest pause inside a client's request body; then 408 `request_timeout`. */
    bodyTimeoutMs: number;
    /** Slowest average a request body may arrive at after its first 10 s; then 408 (0: off). */
    minBodyBytesPerSecond: number;
  };
  admin: {
    listen: HostPort;
  };
  log: {
    level: LogLevel;
  };
  cache: {
    /** Empty: the response cache is off. */
    rules: CacheRule[];
    maxBytes: number;
    maxEntryBytes: number;
    maxEntries: number;
    /** With a store: entries shared by the fleet, filled once for it (docs/response-cache.md). */
    shared: boolean;
    /** Largest body written to the store; larger ones stay local. */
    maxSharedEntryBytes: number;
    /** How long past its freshness an entry may answer when the API cannot; 0: never. */
    staleIfErrorSeconds: number;
    /** How long past its freshness an entry answers at once while one request refreshes it. */
    staleWhileRevalidateSeconds: number;
  };
  /** The egress proxy for the token endpoint and the API; serialised without its user-info. */
  egress: EgressConfig;
  /** OpenTelemetry tracing; undefined: off (no endpoint, or OTEL_SDK_DISABLED). */
  tracing: TracingConfig | undefined;
  quota: {
    /** Who this sidecar serves (`quota.caller`); the fallback in gateway mode. */
    caller: string;
    /** Gateway mode: the request header (lower case) naming the caller; undefined: off. */
    callerHeader: string | undefined;
    /** Weights and priorities of named callers; unlisted: weight 1, interactive. */
    callers: NamedCallerPolicy[];
  };
  /** Caller identity on a shared gateway (docs/configuration.md "Caller identity"). */
  callers: CallersConfig;
  /**
   * Problems that did not stop the start (unknown settings without `strictConfig`, a certificate
   * of the CA bundle TLS would not read), one line each.
   */
  warnings?: readonly string[];
}

/** OpenTelemetry tracing, from OpenTelemetry's own variables (docs/configuration.md "Tracing"). */
export interface TracingConfig {
  /** Where spans are sent: the traces endpoint, or the endpoint + `/v1/traces`. */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  /** Sent with every export (may hold an API key: never logged). */
  headers: Record<string, string>;
  serviceName: string;
  resourceAttributes: Record<string, string>;
  sampler: string;
  samplerArg: number;
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduleDelayMs: number;
  exportTimeoutMs: number;
  /** Record the query string in `url.query` (off: it may carry identifiers). */
  recordQuery: boolean;
}
