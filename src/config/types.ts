/** The validated configuration every other module receives (DESIGN.md "Configuration"). */

export interface HostPort {
  host: string;
  port: number;
}

export type TokenFormat = 'json' | 'form';
export type ClientAuth = 'body' | 'basic';
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

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
  };
  credentials: CredentialsConfig;
  proxy: {
    listen: HostPort;
    /** Serve h2c (prior knowledge) on the proxy listener instead of HTTP/1.1. */
    http2: boolean;
  };
  admin: {
    listen: HostPort;
  };
  log: {
    level: LogLevel;
  };
}
