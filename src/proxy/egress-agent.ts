/**
 * The dispatcher through the egress proxy (docs/configuration.md "Egress proxy"): undici's
 * ProxyAgent, which opens an HTTP `CONNECT` tunnel per connection and runs TLS to the origin inside
 * it, with a Pool per origin made from the same options as the direct path (connections, keep-alive,
 * h2 offer). undici's public API only: its package index (fetch, WebSocket, ...: docs/benchmarks.md
 * "Footprint") comes with this module, which dispatcher.ts loads only when a proxy is configured;
 * without one neither is in the process (test/startup-imports.test.ts).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { SecureContext } from 'node:tls';
import { Client, ProxyAgent, type Dispatcher, type Pool } from 'undici';
import { shownProxy } from '../config/egress.js';
import { EgressProxyError } from '../errors.js';
import { cappedPool, socketCap } from './connection-cap.js';

export interface EgressDispatcherOptions {
  /** The proxy URL (may hold user and password: sent as `Proxy-Authorization: Basic`). */
  proxy: string;
  /** System roots plus `upstream.caFile`: for the origin, and for an `https://` proxy. */
  secureContext: SecureContext | undefined;
  http2: boolean;
  connections: number | null;
  keepAliveTimeout: number;
}

type ConnectCallback = (err: Error | null, data: Dispatcher.ConnectData) => void;

/**
 * The client to the proxy (ProxyAgent's `clientFactory`), on which ProxyAgent calls `connect()`.
 * A `CONNECT` that fails, or is answered with anything but 200, becomes an
 * {@link EgressProxyError} naming the proxy (never its user-info), its answer and what to fix;
 * ProxyAgent passes it on as the connection's failure.
 */
export class TunnelClient extends Client {
  readonly #shown: string;

  constructor(url: string | URL, options: Client.Options, shown: string) {
    super(url, options);
    this.#shown = shown;
  }

  override connect(options: Dispatcher.ConnectOptions): Promise<Dispatcher.ConnectData>;
  override connect(options: Dispatcher.ConnectOptions, callback: ConnectCallback): void;
  override connect(
    options: Dispatcher.ConnectOptions,
    callback?: ConnectCallback,
  ): Promise<Dispatcher.ConnectData> | void {
    const tunnel = this.#tunnel(options);
    if (callback === undefined) return tunnel;
    tunnel.then(
      (data) => callback(null, data),
      (err: Error) => callback(err, undefined as never),
    );
  }

  async #tunnel(options: Dispatcher.ConnectOptions): Promise<Dispatcher.ConnectData> {
    let data: Dispatcher.ConnectData;
    try {
      data = await super.connect(options);
    } catch (cause) {
      // An abort is the request's own; a wrong proxy certificate name keeps undici's error type.
      const code = (cause as { code?: unknown } | null)?.code;
      if (
        (options.signal as { aborted?: boolean } | undefined)?.aborted === true ||
        code === 'ERR_TLS_CERT_ALTNAME_INVALID'
      )
        throw cause;
      throw new EgressProxyError(this.#shown, options.path, { cause });
    }
    if (data.statusCode !== 200) {
      data.socket.destroy();
      throw new EgressProxyError(this.#shown, options.path, { status: data.statusCode });
    }
    return data;
  }
}

/**
 * Requests come with node's flat name/value header list; ProxyAgent would fold it into an object
 * keeping only the last of repeated names, so repeated names become arrays (sent as they came).
 */
export function headerObject(flat: readonly string[]): IncomingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const name = flat[i]!;
    const value = flat[i + 1]!;
    const held = out[name];
    out[name] = held === undefined ? value : Array.isArray(held) ? [...held, value] : [held, value];
  }
  return out;
}

/** The interceptor in front of ProxyAgent that hands it header lists as {@link headerObject}s. */
export const keepRepeatedHeaders: Dispatcher.DispatcherComposeInterceptor =
  (dispatch) => (options, handler) =>
    dispatch(
      Array.isArray(options.headers)
        ? { ...options, headers: headerObject(options.headers) }
        : options,
      handler,
    );

/**
 * A dispatcher whose connections are tunnels through `options.proxy`. Its agent's Pools (one per
 * origin, remade when one has gone idle) share one {@link socketCap}: at most `connections`
 * tunnels to the origin at once, however many Pools the agent holds meanwhile.
 */
export function createEgressDispatcher(options: EgressDispatcherOptions): Dispatcher {
  const shown = shownProxy(options.proxy);
  const tls = options.secureContext === undefined ? {} : { secureContext: options.secureContext };
  const cap = options.connections === null ? undefined : socketCap(options.connections);
  return new ProxyAgent({
    uri: options.proxy,
    clientFactory: (url, opts) => new TunnelClient(url, opts, shown),
    factory: (origin, opts: Pool.Options) => cappedPool(String(origin), opts, cap),
    // TLS to the origin inside the tunnel: the same trust and h2 offer as a direct connection.
    requestTls: { ...tls, allowH2: options.http2 },
    proxyTls: tls,
    allowH2: options.http2,
    connections: options.connections,
    keepAliveTimeout: options.keepAliveTimeout,
  }).compose(keepRepeatedHeaders);
}
