/** A real proxy server in front of the real stand-in, for the proxy integration tests. */
import { connect } from 'node:net';
import { Registry } from 'prom-client';
import { Agent, fetch, type Dispatcher } from 'undici';
import { systemClock } from '../src/clock.js';
import type { SidecarError } from '../src/errors.js';
import { createProxyApp } from '../src/http/proxy-app.js';
import { startProxyServer, type ProxyServer } from '../src/http/proxy-server.js';
import { createForwarder } from '../src/proxy/forwarder.js';
import { createUpstreamDispatcher } from '../src/proxy/dispatcher.js';
import { QuotaGuard, type QuotaGuardOptions } from '../src/proxy/quota/guard.js';
import type { AccessTokenSource } from '../src/proxy/types.js';
import type { Standin } from '../src/standin/index.js';
import { createLogger } from '../src/telemetry/logger.js';
import { createMetrics, type SidecarMetrics } from '../src/telemetry/metrics.js';

/** A stand-in for the keeper: gets real tokens from the stand-in's token endpoint. */
export class StandinTokens implements AccessTokenSource {
  current: string | undefined;
  failure: SidecarError | undefined;
  invalidations = 0;
  private readonly agent: Agent;

  constructor(private readonly standin: Standin) {
    this.agent = new Agent({ connect: { ca: standin.caCert } });
  }

  async getAccessToken(): Promise<string> {
    if (this.failure) throw this.failure;
    this.current ??= await this.fetchToken();
    return this.current;
  }

  invalidate(token: string): boolean {
    if (token !== this.current) return false;
    this.current = undefined;
    this.invalidations += 1;
    return true;
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
  proxy: ProxyServer;
  tokens: StandinTokens;
  metrics: SidecarMetrics;
  logs: Record<string, unknown>[];
  draining: { value: boolean };
  dispatcher: Dispatcher;
  /** The quota guard in front of the upstream (no limit unless `quota` options were given). */
  quota: QuotaGuard;
  close(): Promise<void>;
}

export interface StackOptions {
  upstream?: string;
  timeoutMs?: number;
  http2?: boolean;
  upstreamHttp2?: boolean;
  /** Quota guard settings; default: no rate limit, 300 s cooldown cap. */
  quota?: Partial<
    Pick<QuotaGuardOptions, 'rateLimit' | 'queueMs' | 'maxCooldownSeconds' | 'maxQueued' | 'shared'>
  >;
}

export async function startStack(standin: Standin, options: StackOptions = {}): Promise<Stack> {
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: 'info',
    destination: {
      write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>),
    },
  });
  const metrics = createMetrics({ registry: new Registry(), defaultMetrics: false });
  const tokens = new StandinTokens(standin);
  const dispatcher = createUpstreamDispatcher({
    ca: standin.caCert,
    http2: options.upstreamHttp2 ?? false,
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
  const forwarder = createForwarder({
    upstream: options.upstream ?? standin.url,
    dispatcher,
    tokens,
    timeoutMs: options.timeoutMs ?? 5_000,
    metrics,
    logger,
    clock: systemClock,
    quota,
  });
  const draining = { value: false };
  const app = createProxyApp({
    prefixes: ['/v1.0/', '/beta/'],
    forwarder,
    logger,
    metrics,
    isDraining: () => draining.value,
  });
  const proxy = await startProxyServer({
    app,
    listen: { host: '127.0.0.1', port: 0 },
    http2: options.http2 ?? false,
    logger,
    metrics,
    beginDrain: () => {
      draining.value = true;
    },
  });
  return {
    url: `http://127.0.0.1:${proxy.address.port}`,
    port: proxy.address.port,
    proxy,
    tokens,
    metrics,
    logs,
    draining,
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
