/**
 * Built-in defaults, the lowest configuration layer (DESIGN.md "Configuration": defaults < YAML
 * file < environment). One named constant per key so the schema, `config/example.yaml` and the
 * tests agree on a single value.
 */
import type { ClientAuth, HostPort, LogLevel, TokenFormat } from './types.js';

/** `upstream.pathPrefixes`: the API's only documented version prefix (spec §9). */
export const DEFAULT_PATH_PREFIXES: readonly string[] = ['/v1.0/'];
/** `upstream.timeoutMs`: time to response headers before a 504. */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000;
/** `upstream.allowInsecureHttp`: plain http is refused unless explicitly allowed (spec §5.1). */
export const DEFAULT_ALLOW_INSECURE_HTTP = false;
/** `upstream.http2`: offer HTTP/2 through ALPN. */
export const DEFAULT_UPSTREAM_HTTP2 = false;

/** Path of the token endpoint under the base URL when `token.url` is not set (spec §4.1). */
export const DEFAULT_TOKEN_PATH = '/oauth/token/';
/** `token.format`: the API's camelCase JSON format (spec §4.1, format A). */
export const DEFAULT_TOKEN_FORMAT: TokenFormat = 'json';
/** `token.clientAuth`: credentials in the request body. */
export const DEFAULT_CLIENT_AUTH: ClientAuth = 'body';
/** `token.scopes`: none requested. */
export const DEFAULT_SCOPES: readonly string[] = [];
/** `token.timeoutMs`: one token request, connect to last byte. */
export const DEFAULT_TOKEN_TIMEOUT_MS = 10_000;
/** `token.waitMs`: how long a proxied request waits for a token before 503. */
export const DEFAULT_TOKEN_WAIT_MS = 5_000;
/** `token.refreshMarginSeconds`: renew at least this long before expiry. */
export const DEFAULT_REFRESH_MARGIN_SECONDS = 60;
/** `token.refreshFraction`: ...or this fraction of the lifetime, whichever is earlier. */
export const DEFAULT_REFRESH_FRACTION = 0.2;

/** `proxy.listen`: loopback, so only the pod itself can spend the credentials. */
export const DEFAULT_PROXY_LISTEN: Readonly<HostPort> = { host: '127.0.0.1', port: 8080 };
/** `proxy.http2`: serve h2c instead of HTTP/1.1. */
export const DEFAULT_PROXY_HTTP2 = false;
/** `admin.listen`: all interfaces, so the kubelet and Prometheus can reach the probes and metrics. */
export const DEFAULT_ADMIN_LISTEN: Readonly<HostPort> = { host: '0.0.0.0', port: 9090 };
/** Host used for a listen address written as `:port`. */
export const DEFAULT_LISTEN_HOST = '0.0.0.0';

/** `log.level`. */
export const DEFAULT_LOG_LEVEL: LogLevel = 'info';

/** Example shown when `upstream.baseUrl` is missing. */
export const EXAMPLE_BASE_URL = 'https://api.sparkcommodities.com';
