/**
 * `oauth-sidecar demo`: the embedded stand-in API and the sidecar in front of it (DESIGN.md
 * "Command line"). The stand-in and its certificate generator are loaded only here.
 */
import type { Config } from '../config/types.js';
import type { Io } from './check.js';

type Env = Record<string, string | undefined>;

/** The demo's token lifetime: short, so renewals show in the log within a minute. */
export const DEMO_TOKEN_LIFETIME_SECONDS = 30;

/** Environment for the demo: only listener and log settings pass through; the rest is the stand-in's. */
export function demoEnv(env: Env, standinUrl: string): Env {
  const passThrough = [
    'PROXY_LISTEN',
    'ADMIN_LISTEN',
    'LOG_LEVEL',
    'PROXY_HTTP2',
    'UPSTREAM_HTTP2',
  ];
  const out: Env = {
    UPSTREAM_BASE_URL: standinUrl,
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: 'demo-secret',
    // The demo's admin listener stays on loopback unless asked otherwise.
    ADMIN_LISTEN: '127.0.0.1:9090',
  };
  for (const key of passThrough) if (env[key] !== undefined) out[key] = env[key];
  return out;
}

export function curlTarget(address: { host: string; port: number }): string {
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  const shown = host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host;
  return `http://${shown}:${address.port}/v1.0/contracts/`;
}

export interface DemoDeps<
  S extends { proxyAddress: { host: string; port: number }; adminAddress: { port: number } },
> {
  /** Load the configuration from the demo's environment (ConfigError on bad values). */
  loadConfig(env: Env): Promise<Config>;
  /** Start the sidecar against the stand-in, trusting its CA. */
  startSidecar(config: Config, caPem: string): Promise<S>;
  /** Called once the sidecar serves, with a cleanup that stops the stand-in. */
  serve(sidecar: S, cleanup: () => Promise<void>): void;
}

/** Start the demo; returns an exit code on failure, undefined while it serves. */
export async function runDemo<
  S extends { proxyAddress: { host: string; port: number }; adminAddress: { port: number } },
>(env: Env, io: Io, deps: DemoDeps<S>): Promise<number | undefined> {
  const { startStandin } = await import('../standin/index.js');
  const standin = await startStandin({ tokenLifetimeSeconds: DEMO_TOKEN_LIFETIME_SECONDS });
  let sidecar: S;
  try {
    const config = await deps.loadConfig(demoEnv(env, standin.url));
    sidecar = await deps.startSidecar(config, standin.caCert);
  } catch (error) {
    await standin.close();
    throw error;
  }
  deps.serve(sidecar, () => standin.close());
  io.out('');
  io.out('oauth-sidecar demo is running (stand-in API, no network, no credentials). Try:');
  io.out('');
  io.out(`  curl ${curlTarget(sidecar.proxyAddress)}`);
  io.out('');
  io.out(`Status: curl http://127.0.0.1:${sidecar.adminAddress.port}/status   Stop: Ctrl-C`);
  io.out('');
  return undefined;
}
