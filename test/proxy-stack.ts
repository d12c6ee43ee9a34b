/** A real proxy server in front of the real stand-in, for the proxy integration tests. */
import { connect } from 'node:net';
import { Registry } from 'prom-client';
import { Agent, fetch, type Dispatcher } from 'undici';
import { systemClock } from '../src/clock.js';
import type { SidecarError } from '../src/errors.js';
import { createRequestLog } from '../src/http/request-log.js';
import { startProxy, type ProxySettings, type RunningProxy } from '../src/http/start-proxy.js';
import { createUpstreamDispatcher } from '../src/proxy/dispatcher.js';
import type { ForwardStage } from '../src/proxy/forwarder.js';
import { QuotaGuard, type QuotaGuardOptions } from '../src/proxy/quota/guard.js';
import { quotaStage } from '../src/proxy/quota/stage.js';
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
  /** The quota guard; on the request path only when `quota` options were given. */
  quota: QuotaGuard;
  close(): Promise<void>;
}

export interface StackOptions {
  upstream?: string;
  timeoutMs?: number;
  http2?: boolean;
  upstreamHttp2?: boolean;
  /** Overrides of the shipped defaults (config/schema.ts) for the limits under test. */
  limits?: Partial<ProxySettings['proxy']> & {
    maxConnections?: number;
    upstreamBodyTimeoutMs?: number;
    keepAliveTimeoutMs?: number;
  };
  stages?: ForwardStage[];
  logLevel?: string;
  /** Put the quota guard on the request path with these settings (default: not installed). */
  quota?: Partial<
    Pick<QuotaGuardOptions, 'rateLimit' | 'queueMs' | 'maxCooldownSeconds' | 'maxQueued' | 'shared'>
  >;
}

/** The shipped defaults of the proxy limits (docs/configuration.md). */
export const DEFAULT_LIMITS = {
  maxInFlight: 512,
  maxPipelined: 8,
  maxHeaders: 100,
  clientBodyTimeoutMs: 30_000,
  maxConnections: 64,
  upstreamBodyTimeoutMs: 30_000,
} as const;

export async function startStack(standin: Standin, options: StackOptions = {}): Promise<Stack> {
  const logs: Record<string, unknown>[] = [];
  const sink = {
    // One or more whole lines per write (the request log batches them).
    write: (lines: string) => {
      for (const line of lines.split('\n')) {
        if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      }
    },
  };
  const level = options.logLevel ?? 'info';
  const logger = createLogger({ level, destination: sink });
  const metrics = createMetrics({ registry: new Registry(), defaultMetrics: false });
  const tokens = new StandinTokens(standin);
  const limits = options.limits ?? {};
  const dispatcher = createUpstreamDispatcher({
    ca: standin.caCert,
    http2: options.upstreamHttp2 ?? false,
    connections: limits.maxConnections ?? DEFAULT_LIMITS.maxConnections,
    origin: options.upstream ?? standin.url,
  });
  const quota = new QuotaGuard({
    rateLimit: undefined,
    queueMs: 2_000,
    maxCooldownSeconds: 300,
    ...options.quota,
    clock: systemClock,
    metrics,
    logger,
  });
  metrics.bindQuotaState(quota);
  quota.start();
  const proxy = await startProxy(
    {
      upstream: {
        baseUrl: options.upstream ?? standin.url,
        pathPrefixes: ['/v1.0/', '/beta/'],
        timeoutMs: options.timeoutMs ?? 5_000,
        bodyTimeoutMs: limits.upstreamBodyTimeoutMs ?? DEFAULT_LIMITS.upstreamBodyTimeoutMs,
      },
      proxy: {
        listen: { host: '127.0.0.1', port: 0 },
        http2: options.http2 ?? false,
        maxInFlight: limits.maxInFlight ?? DEFAULT_LIMITS.maxInFlight,
        maxPipelined: limits.maxPipelined ?? DEFAULT_LIMITS.maxPipelined,
        maxHeaders: limits.maxHeaders ?? DEFAULT_LIMITS.maxHeaders,
        bodyTimeoutMs: limits.bodyTimeoutMs ?? DEFAULT_LIMITS.clientBodyTimeoutMs,
        keepAliveTimeoutMs: limits.keepAliveTimeoutMs,
      },
    },
    {
      dispatcher,
      tokens,
      metrics,
      logger,
      requestLog: createRequestLog({ level, sink }),
      stages:
        options.quota === undefined
          ? options.stages
          : [quotaStage(quota), ...(options.stages ?? [])],
    },
  );
  return {
    url: `http://127.0.0.1:${proxy.address.port}`,
    port: proxy.address.port,
    proxy,
    tokens,
    metrics,
    logs,
    dispatcher,
    quota,
    async close() {
      quota.close();
      await proxy.drain(1_000);
      await dispatcher.close();
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
