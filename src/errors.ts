/**
 * Every error the sidecar knows, in one module (docs/design.md "Practices" 3). Codes are stable: they appear in the
 * error envelope, in logs and in the `oauth_sidecar_proxy_rejected_total{code}` metric.
 * Imports nothing internal.
 */

/** Codes of errors the sidecar answers itself, with their HTTP status (docs/reference.md "Error codes"). */
export const PROXY_ERROR_STATUS = {
  bad_request: 400,
  /** `callers.auth: jwt`: no caller token, or one that failed verification (docs/configuration.md "Caller identity"). */
  caller_unauthenticated: 401,
  /** A verified caller whose rule (`callers.rules`) does not allow the request, or no rule names it. */
  caller_forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  upstream_unreachable: 502,
  token_unavailable: 503,
  shutting_down: 503,
  upstream_timeout: 504,
  /** The client's request body paused longer than `proxy.bodyTimeoutMs`, or came slower than `proxy.minBodyBytesPerSecond`. */
  request_timeout: 408,
  /** No slot under `upstream.rateLimit` within `upstream.queueMs`. */
  rate_limited: 429,
  /** The API answered 429 with `Retry-After`; the sidecar answers itself until then. */
  upstream_rate_limited: 429,
  /** More than `proxy.maxHeaders` header fields, or over node's header size limit. */
  request_headers_too_large: 431,
  /** `proxy.maxInFlight` requests already in progress. */
  overloaded: 503,
  /** The API answered 503 with `Retry-After`; the sidecar answers itself until then. */
  upstream_unavailable: 503,
  /** A fault the sidecar did not anticipate (a bug); never an upstream or token problem. */
  internal_error: 500,
} as const;

export type ProxyErrorCode = keyof typeof PROXY_ERROR_STATUS;

/** Attach a property that never shows up in JSON.stringify or a pino log line. */
function hide(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: false, writable: false });
}

/**
 * An expected outcome, not a bug: it carries no stack trace (its message says where it came from).
 * Capturing one shows in the CPU of an h2 reset storm, where every refused or reset stream makes
 * such an error (docs/benchmarks.md "Floods and storms").
 */
export class OutcomeError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message, options);
    Error.stackTraceLimit = stackTraceLimit;
  }
}

/** An error the sidecar turns into an HTTP answer in the API's envelope (no stack trace). */
export class SidecarError extends OutcomeError {
  readonly code: ProxyErrorCode;
  readonly status: number;
  /** Whole seconds for `Retry-After`, when the client should come back later. */
  readonly retryAfterSeconds: number | undefined;
  /** Further fields of the answer, lower-case names (the RateLimit fields of a 429 `rate_limited`). */
  readonly fields: Readonly<Record<string, string>> | undefined;

  constructor(
    code: ProxyErrorCode,
    detail: string,
    options: {
      cause?: unknown;
      retryAfterSeconds?: number;
      fields?: Readonly<Record<string, string>> | undefined;
    } = {},
  ) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SidecarError';
    this.code = code;
    this.status = PROXY_ERROR_STATUS[code];
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.fields = options.fields;
  }
}

/** No valid token could be had within `token.waitMs`; 503 with `Retry-After`. */
export class TokenUnavailableError extends SidecarError {
  constructor(detail: string, retryAfterSeconds: number, cause?: unknown) {
    super('token_unavailable', detail, {
      cause,
      retryAfterSeconds: Math.max(1, Math.ceil(retryAfterSeconds)),
    });
    this.name = 'TokenUnavailableError';
  }
}

/**
 * How a token endpoint call failed. `rejected` is a 4xx other than 429 (the grant itself was
 * refused: wrong secret, dead refresh token); every other kind is transient and retried with backoff.
 */
export type TokenErrorKind =
  'network' | 'timeout' | 'rejected' | 'server' | 'malformed' | 'redirect';

export class TokenEndpointError extends Error {
  readonly kind: TokenErrorKind;
  /** HTTP status, when an answer arrived. */
  readonly status: number | undefined;
  /** `Retry-After` from the answer, in milliseconds. */
  readonly retryAfterMs: number | undefined;
  /** OAuth `error` / the API's `errors[0].code`, when the body carried one. Never a secret. */
  readonly oauthError: string | undefined;

  constructor(
    kind: TokenErrorKind,
    message: string,
    options: {
      status?: number;
      retryAfterMs?: number;
      oauthError?: string;
      cause?: unknown;
      /** The raw answer body; kept non-enumerable so it never reaches a log line. */
      body?: string;
    } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'TokenEndpointError';
    this.kind = kind;
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
    this.oauthError = options.oauthError;
    hide(this, 'body', options.body);
  }
}

/**
 * The one rejected/transient predicate: true for a grant the token endpoint refused (a 4xx other
 * than 429: wrong secret, dead refresh token); every other failure is transient, retried with
 * backoff.
 */
export function isRejectedGrant(error: unknown): boolean {
  return error instanceof TokenEndpointError && error.kind === 'rejected';
}

/**
 * The client credentials could not be read (missing file, FIFO, a read over its deadline, a
 * malformed CSV): the attempt fails and is retried with backoff like a transient endpoint error.
 */
export class CredentialsReadError extends Error {
  constructor(cause: unknown) {
    super(`could not read the client credentials: ${errorText(cause)}`, { cause });
    this.name = 'CredentialsReadError';
  }
}

/** What to fix when the egress proxy answers `CONNECT` with this status. */
function egressAdvice(status: number): string {
  // 407 asks for credentials; some proxies (tinyproxy) answer a wrong password with 401.
  if (status === 407 || status === 401) {
    return 'the proxy wants other credentials: check the user and password in the proxy URL (HTTPS_PROXY / egress.proxy)';
  }
  if (status === 403) {
    return 'the proxy refuses this destination: ask for the host and port to be allowed, or list the host in NO_PROXY if it is reached directly';
  }
  if (status >= 500) return 'the proxy could not reach the destination or is failing';
  return 'the proxy did not open the tunnel';
}

/**
 * The egress proxy (docs/configuration.md "Egress proxy") refused or could not be reached, or
 * answered `CONNECT` with something other than 200. The message names the proxy (without its
 * user-info), its answer and what to fix; transient: retried like any connection failure.
 */
export class EgressProxyError extends OutcomeError {
  readonly code = 'EGRESS_PROXY';
  /** The proxy as shown: `http://***@proxy:3128`. */
  readonly proxy: string;
  /** The proxy's answer to `CONNECT`; undefined when it could not be reached. */
  readonly status: number | undefined;

  constructor(proxy: string, target: string, failure: { status: number } | { cause: unknown }) {
    const message =
      'status' in failure
        ? `egress proxy ${proxy} answered CONNECT ${target} with ${failure.status}: ${egressAdvice(failure.status)}`
        : `egress proxy ${proxy} unreachable (${egressCause(failure.cause)}): check the proxy URL (HTTPS_PROXY / egress.proxy) and that the proxy runs and may be reached from here`;
    super(message, 'cause' in failure ? { cause: failure.cause } : undefined);
    this.name = 'EgressProxyError';
    this.proxy = proxy;
    this.status = 'status' in failure ? failure.status : undefined;
  }
}

function egressCause(cause: unknown): string {
  const code = (cause as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : errorText(cause).slice(0, 100);
}

/** The message of an Error, or the value as text. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Invalid configuration: every problem at once, one line each. The process exits with 78. */
export class ConfigError extends Error {
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** EX_CONFIG from sysexits.h: what `oauth-sidecar` exits with on bad configuration. */
export const EXIT_CONFIG = 78;

/** 503 `overloaded` with `Retry-After: 1`: a limit of the sidecar's own is full. */
export function overloadedError(detail: string): SidecarError {
  return new SidecarError('overloaded', detail, { retryAfterSeconds: 1 });
}

/** Any error as an envelope-ready SidecarError: unknown errors become `internal_error`. */
export function asSidecarError(error: unknown): SidecarError {
  if (error instanceof SidecarError) return error;
  return new SidecarError('internal_error', 'internal error in the sidecar', { cause: error });
}

/** The body of an error the sidecar answers itself: the API's own envelope plus the request id. */
export interface ErrorEnvelope {
  errors: { code: ProxyErrorCode; detail: string }[];
  requestId: string;
}

export function errorEnvelope(error: SidecarError, requestId: string): ErrorEnvelope {
  return { errors: [{ code: error.code, detail: error.message }], requestId };
}

/**
 * The shared token store is down, slow (past its 500 ms bound) or answered an error. Never reaches
 * a client: every caller falls back to what one process does alone (docs/design.md "Practices").
 */
export class StoreError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'StoreError';
  }
}

/** What a listener's socket error means for the operator, by `code`. */
const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE:
    'address already in use (another process, e.g. a second sidecar or demo, listens there)',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EADDRNOTAVAIL: 'no such address on this host',
};

/** A listener could not bind: names the setting to change, e.g. `PROXY_LISTEN (proxy.listen)`. */
export class ListenError extends Error {
  constructor(
    readonly setting: { env: string; key: string },
    readonly address: string,
    cause: unknown,
  ) {
    const code = (cause as { code?: unknown } | null)?.code;
    const why = (typeof code === 'string' && LISTEN_FAILURES[code]) || errorText(cause);
    super(
      `${setting.env} (${setting.key}) ${address}: ${why}; set ${setting.env} to a free address`,
      { cause },
    );
    this.name = 'ListenError';
  }
}
