/** A real proxy server in front of the real stand-in, for the proxy integration tests. */
import { createMetricsRegistry } from '../src/telemetry/exposition.js';
import { connect } from 'node:net';
import { Agent, fetch, type Dispatcher } from 'undici';
import { systemClock } from '../src/clock.js';
import { loadConfig } from '../src/config/load.js';
import type { Config, LogLevel } from '../src/config/types.js';
import type { SidecarError } from '../src/errors.js';
import { createRequestLog } from '../src/http/request-log.js';
import type { RunningProxy } from '../src/http/start-proxy.js';
import type { ForwardStage } from '../src/proxy/forwarder.js';
import type { QuotaGuard, SharedQuota } from '../src/proxy/quota/guard.js';
import { startProxyStack } from '../src/sidecar/proxy-stack.js';
import { Teardown } from '../src/sidecar/teardown.js';
import type { AccessTokenSource } from '../src/proxy/types.js';
import type { Standin } from '../src/standin/index.js';
import { createLogger } from '../src/telemetry/logger.js';
import { createMetrics, type SidecarMetrics } from '../src/telemetry/metrics.js';

/**
 * A stand-in for the keeper: gets real tokens from the stand-in's token endpoint. `invalidate`
 * follows the keeper's contract (token/keeper.ts): true when a replay would not carry `token`
 * again — a token that is no longer current (a newer one replaced it) or one just dropped.
 */
export class StandinTokens implements AccessTokenSource {
  current: string | undefined;
  failure: SidecarError | undefined;
  invalidations = 0;
  private readonly agent: Agent;

  constructor(private readonly standin: Standin) {
    this.agent = new Agent({ connect: { ca: standin.caCert } });
  }

  /** While set, getAccessToken waits for it (a token request in flight, as seen by callers). */
  held: Promise<void> | undefined;
  /** Calls that are waiting on `held` right now. */
  waiting = 0;

  /** Make getAccessToken wait until the returned function is called. */
  hold(): () => void {
    let release!: () => void;
    this.held = new Promise((resolve) => (release = resolve));
    return () => {
      this.held = undefined;
      release();
    };
  }

  async getAccessToken(): Promise<string> {
    if (this.held) {
      this.waiting += 1;
      try {
        await this.held;
      } finally {
        this.waiting -= 1;
      }
    }
    if (this.failure) throw this.failure;
    this.current ??= await this.fetchToken();
    return this.current;
  }

  /** The keeper's contract: the token held now, only when nothing would make a caller wait. */
  currentToken(): string | undefined {
    return this.held === undefined && this.failure === undefined ? this.current : undefined;
  }

  invalidate(token: string): 'replay' | 'renewing' | 'keep' {
    if (token !== this.current) return 'replay';
    this.current = undefined;
    this.invalidations += 1;
    return 'renewing';
  }

  private async fetchToken(): Promise<string> {
    const res = await fetch(`${this.standin.url}/oauth/token/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        grantType: 'clientCredentials',
        clientId: 'demo-client',
        clientSecret: 'demo-secret',
      }),
      dispatcher: this.agent,
    });
    const body = (await res.json()) as { accessToken: string };
    return body.accessToken;
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

export interface Stack {
  url: string;
  port: number;
  proxy: RunningProxy;
  tokens: StandinTokens;
  metrics: SidecarMetrics;
  logs: Record<string, unknown>[];
  dispatcher: Dispatcher;
  quota: QuotaGuard;
  config: Config;
  close(): Promise<void>;
}

export interface StackOptions {
  upstream?: string;
  timeoutMs?: number;
  http2?: boolean;
  upstreamHttp2?: boolean;
  /** Overrides of the shipped defaults (config/schema.ts) for the limits under test. */
  limits?: Partial<
    Pick<
      Config['proxy'],
      'maxInFlight' | 'maxPipelined' | 'maxHeaders' | 'bodyTimeoutMs' | 'minBodyBytesPerSecond'
    >
  > & {
    maxConnections?: number;
    upstreamBodyTimeoutMs?: number;
    keepAliveTimeoutMs?: number;
  };
  /** A response cache built by the test (on its own clock); default: none, as `cache.rules` is empty. */
  cache?: ForwardStage;
  logLevel?: LogLevel;
  /** Quota settings (`upstream.rateLimit`, `queueMs`, `maxCooldownSeconds`) and a fleet half. */
  quota?: Partial<Pick<Config['upstream'], 'rateLimit' | 'queueMs' | 'maxCooldownSeconds'>> & {
    shared?: SharedQuota;
  };
}

/** The shipped configuration (defaults from config/schema.ts) with the test's overrides. */
async function stackConfig(standin: Standin, options: StackOptions): Promise<Config> {
  const config = await loadConfig({
    env: {
      UPSTREAM_BASE_URL: options.upstream ?? standin.url,
      UPSTREAM_ALLOW_INSECURE_HTTP: 'true',
      UPSTREAM_PATH_PREFIXES: '/v1.0/,/beta/',
      UPSTREAM_TIMEOUT_MS: String(options.timeoutMs ?? 5_000),
      CLIENT_ID: 'demo-client',
      CLIENT_SECRET: 'demo-secret',
      PROXY_LISTEN: '127.0.0.1:0',
      LOG_LEVEL: options.logLevel ?? 'info',
    },
  });
  const {
    maxConnections,
    upstreamBodyTimeoutMs,
    keepAliveTimeoutMs: _,
    ...proxy
  } = options.limits ?? {};
  const { shared: __, ...quota } = options.quota ?? {};
  Object.assign(config.proxy, proxy, { http2: options.http2 ?? false });
  Object.assign(config.upstream, quota, {
    http2: options.upstreamHttp2 ?? false,
    maxConnections: maxConnections ?? config.upstream.maxConnections,
    bodyTimeoutMs: upstreamBodyTimeoutMs ?? config.upstream.bodyTimeoutMs,
  });
  return config;
}

/** The proxy stack that ships (sidecar.ts), with the stand-in's tokens in place of the keeper. */
export async function startStack(standin: Standin, options: StackOptions = {}): Promise<Stack> {
  const config = await stackConfig(standin, options);
  const logs: Record<string, unknown>[] = [];
  const sink = {
    // One or more whole lines per write (the request log batches them).
    write: (lines: string) => {
      for (const line of lines.split('\n')) {
        if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      }
    },
  };
  const logger = createLogger({ level: config.log.level, destination: sink });
  const metrics = createMetrics({
    registry: createMetricsRegistry(),
    defaultMetrics: false,
  });
  const tokens = new StandinTokens(standin);
  const teardown = new Teardown();
  const { proxy, quota, dispatcher } = await startProxyStack(config, {
    tokens,
    metrics,
    logger,
    requestLog: createRequestLog({ level: config.log.level, sink }),
    clock: systemClock,
    teardown,
    ca: standin.caCert,
    shared: options.quota?.shared,
    cache: options.cache,
    keepAliveTimeoutMs: options.limits?.keepAliveTimeoutMs,
  });
  return {
    url: `http://127.0.0.1:${proxy.address.port}`,
    port: proxy.address.port,
    proxy,
    tokens,
    metrics,
    logs,
    dispatcher,
    quota,
    config,
    async close() {
      await proxy.drain(1_000);
      await teardown.run();
      await tokens.close();
    },
  };
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Send bytes as they are (no client normalises the target) and read until the server closes. */
export function rawRequest(port: number, text: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const raw = Buffer.concat(chunks).toString('latin1');
      const [head = '', ...rest] = raw.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const at = line.indexOf(':');
        headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
    socket.write(text);
  });
}

/** A GET with `Connection: close`, target sent verbatim. */
export function rawGet(port: number, target: string, extra = ''): Promise<RawAnswer> {
  return rawRequest(
    port,
    `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}Connection: close\r\n\r\n`,
  );
}

/** Body of a chunked answer, de-chunked. */
export function dechunk(body: string): string {
  let out = '';
  let rest = body;
  for (;;) {
    const eol = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, eol), 16);
    if (!size) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

export async function counterValue(
  metrics: SidecarMetrics,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = await metrics.registry.getSingleMetric(name)?.get();
  const match = metric?.values.find((v) =>
    Object.entries(labels).every(([k, val]) => v.labels[k] === val),
  );
  return match?.value ?? 0;
}
