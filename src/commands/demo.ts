/**
 * `oauth-sidecar demo`: the embedded stand-in API and the sidecar in front of it (docs/reference.md
 * "Command line"). The stand-in and its certificate generator are loaded only here.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatConfigProblems, loadConfig } from '../config/load.js';
import { FIELDS } from '../config/schema.js';
import { SETTING_PREFIXES } from '../config/unknown-settings.js';
import type { Config } from '../config/types.js';
import { ConfigError, EXIT_CONFIG } from '../errors.js';
import { startSidecar, type RunningSidecar } from '../sidecar.js';
import {
  createLogDestination,
  createLogger,
  wantsColour,
  type Logger,
} from '../telemetry/logger.js';
import type { Standin } from '../standin/index.js';
import type { Io } from './check.js';
import type { Serving } from './serve.js';

type Env = Record<string, string | undefined>;

/** The demo's token lifetime: short, so renewals show in the log within a minute. */
export const DEMO_TOKEN_LIFETIME_SECONDS = 30;

/** What the demo sets itself: the stand-in is the API, its token endpoint and its client. */
const DEMO_OWNED = new Set([
  'UPSTREAM_BASE_URL',
  'UPSTREAM_CA_FILE',
  'UPSTREAM_ALLOW_INSECURE_HTTP',
  'TOKEN_URL',
  'CLIENT_ID',
  'CLIENT_SECRET',
  'CLIENT_ID_FILE',
  'CLIENT_SECRET_FILE',
  'CLIENT_CREDENTIALS_CSV',
  // The stand-in listens on loopback: an egress proxy would only stand in the way.
  'HTTPS_PROXY',
  'HTTP_PROXY',
  'NO_PROXY',
  // With CALLER_AUTH=jwt the stand-in is the callers' issuer too.
  'CALLER_JWT_ISSUER',
  'CALLER_JWT_JWKS_URL',
  'CALLER_JWT_JWKS_FILE',
  'CALLER_JWT_CA_FILE',
  'CALLER_JWT_BEARER_FILE',
]);

/** With CALLER_AUTH=jwt and no CALLER_RULES: any service account of namespace `demo`. */
export const DEMO_CALLER_RULES = 'system:serviceaccount:demo:*=demo';
/** The subject of the caller token the demo mints for its curl line. */
export const DEMO_CALLER_SUBJECT = 'system:serviceaccount:demo:client';

/** Where the demo's caller identity lives: the stand-in's CA and a minted caller token. */
export interface DemoCallers {
  caFile: string;
  tokenFile: string;
}

/**
 * Environment for the demo: every configuration variable of `env` passes through (the cache,
 * rate limit, listeners, log level, store...), except those naming the API and the client, which
 * are the stand-in's; `ignored` lists those the caller set, for the banner.
 */
export function demoEnv(
  env: Env,
  standinUrl: string,
  variables: readonly string[],
  callers?: DemoCallers,
): { env: Env; ignored: string[] } {
  const out: Env = {
    UPSTREAM_BASE_URL: standinUrl,
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: 'demo-secret',
    // The demo's admin listener stays on loopback unless asked otherwise.
    ADMIN_LISTEN: '127.0.0.1:9090',
  };
  const ignored: string[] = [];
  for (const name of variables) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    if (DEMO_OWNED.has(name)) ignored.push(name);
    else out[name] = value;
  }
  if (callers !== undefined) {
    out.CALLER_AUTH = 'jwt';
    out.CALLER_JWT_ISSUER = standinUrl;
    out.CALLER_JWT_CA_FILE = callers.caFile;
    out.CALLER_RULES = env.CALLER_RULES ?? DEMO_CALLER_RULES;
  }
  return { env: out, ignored };
}

/**
 * With `CALLER_AUTH=jwt`: the stand-in's CA (to read its keys) and a caller token of it, in a
 * private temporary folder removed when the demo stops.
 */
async function prepareCallers(
  env: Env,
  standin: Standin,
): Promise<{ callers: DemoCallers; cleanup(): Promise<void> } | undefined> {
  if (env.CALLER_AUTH !== 'jwt') return undefined;
  const dir = await mkdtemp(join(tmpdir(), 'oauth-sidecar-demo-'));
  await chmod(dir, 0o700);
  const callers = { caFile: join(dir, 'ca.pem'), tokenFile: join(dir, 'caller-token') };
  await writeFile(callers.caFile, standin.caCert);
  const token = await standin.caller.mint({ sub: DEMO_CALLER_SUBJECT, ttlSeconds: 86_400 });
  await writeFile(callers.tokenFile, `${token}\n`, { mode: 0o600 });
  return { callers, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** The route the banner's first curl line names. */
const CONTRACTS_PATH = '/v1.0/contracts/';

/** The stand-in's routes worth trying through the demo (src/standin/api.ts has them all). */
export const DEMO_ROUTES: readonly (readonly [string, string])[] = [
  [CONTRACTS_PATH, 'sample contracts (JSON; Accept: text/csv for CSV)'],
  ['/v1.0/echo/any', 'the request as the stand-in saw it, the demo token included'],
  ['/v1.0/slow/2000', 'answers after 2000 ms'],
  ['/v1.0/bytes/1048576', 'a 1 MiB body'],
  ['/v1.0/status/429?retry-after=30', 'a 429 with Retry-After: starts a 30 s cooldown'],
  ['/v1.0/status/503', 'any status 200..599'],
];

/** The proxy's URL as a local client reaches it (a wildcard address is shown as loopback). */
function proxyBase(address: { host: string; port: number }): string {
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  const shown = host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host;
  return `http://${shown}:${address.port}`;
}

export function curlTarget(address: { host: string; port: number }): string {
  return `${proxyBase(address)}${CONTRACTS_PATH}`;
}

/** The curl options that send the demo's caller token, read from its file at each call. */
export function callerHeader(callers: DemoCallers | undefined): string {
  return callers === undefined ? '' : `-H "Authorization: Bearer $(cat ${callers.tokenFile})" `;
}

/** Start the demo: the stand-in, a pretty logger where available, and the sidecar in front. */
export async function runDemo(env: Env, io: Io): Promise<Serving | number> {
  const { startStandin } = await import('../standin/index.js');
  const standin = await startStandin({ tokenLifetimeSeconds: DEMO_TOKEN_LIFETIME_SECONDS });
  // The settings, and whatever else carries their prefixes, so a misspelt one is named as in serve.
  const variables = [
    ...new Set([
      ...Object.values(FIELDS).map((field) => field.env),
      ...Object.keys(env).filter((name) => SETTING_PREFIXES.some((p) => name.startsWith(p))),
    ]),
  ];
  const prepared = await prepareCallers(env, standin);
  const stop = async (): Promise<void> => {
    await standin.close();
    await prepared?.cleanup();
  };
  const { env: demoEnvironment, ignored } = demoEnv(env, standin.url, variables, prepared?.callers);
  let serving: Serving;
  try {
    const config = await loadConfig({ env: demoEnvironment });
    serving = await startDemoSidecar(config, standin.caCert, wantsColour(process.stdout, env));
    serving.cleanup = stop;
    printBanner(io, config, serving.sidecar, ignored, prepared?.callers);
    return serving;
  } catch (error) {
    await stop();
    if (error instanceof ConfigError) {
      io.err(formatConfigProblems(error));
      return EXIT_CONFIG;
    }
    io.err(
      `oauth-sidecar demo: cannot start: ${error instanceof Error ? error.message : String(error)}`,
    );
    return 1;
  }
}

async function startDemoSidecar(config: Config, caPem: string, colour: boolean): Promise<Serving> {
  const pretty = prettyAvailable();
  const destination = pretty ? undefined : createLogDestination();
  const logger = createLogger({ level: config.log.level, pretty, colour, destination });
  logger.info(
    { upstream: config.upstream.baseUrl, tokenLifetimeSeconds: DEMO_TOKEN_LIFETIME_SECONDS },
    'demo: stand-in API started',
  );
  const sidecar = await startSidecar(config, {
    logger,
    logSink: destination ?? prettySink(logger),
    extraCaPem: caPem,
  });
  return { logger, sidecar };
}

/** Human-readable logs where pino-pretty is installed (a dev dependency): demo and local runs. */
function prettyAvailable(): boolean {
  try {
    createRequire(import.meta.url).resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}

/** With pino-pretty, request lines go through the logger so they are pretty too. */
function prettySink(logger: Logger): { write(lines: string): void } {
  return {
    write(lines) {
      for (const line of lines.split('\n')) {
        if (line === '') continue;
        const { level: _l, time: _t, msg, ...fields } = JSON.parse(line) as Record<string, unknown>;
        logger.info(fields, String(msg));
      }
    },
  };
}

function printBanner(
  io: Io,
  config: Config,
  sidecar: RunningSidecar,
  ignored: readonly string[],
  callers: DemoCallers | undefined,
): void {
  const base = proxyBase(sidecar.proxyAddress);
  const rules = config.cache.rules.map((rule) => `${rule.prefix}=${rule.ttlSeconds}s`);
  const limit = config.upstream.rateLimit;
  const header = callerHeader(callers);
  io.out('');
  io.out('oauth-sidecar demo is running (stand-in API, no network, no credentials). Try:');
  io.out('');
  io.out(`  curl ${header}${curlTarget(sidecar.proxyAddress)}`);
  io.out('');
  io.out('Other routes of the stand-in:');
  for (const [path, what] of DEMO_ROUTES.slice(1)) {
    io.out(`  curl ${header}'${base}${path}'   ${what}`);
  }
  if (callers !== undefined) {
    io.out('');
    io.out(
      `Callers: CALLER_AUTH=jwt, the stand-in is the issuer; the token above is ${DEMO_CALLER_SUBJECT}'s (a day); without it: 401`,
    );
  }
  io.out('');
  io.out(
    `Cache: ${rules.length > 0 ? rules.join(', ') : 'off (set CACHE_RULES=/v1.0/contracts/=60)'}`,
  );
  io.out(
    `Rate limit: ${limit === undefined ? 'none (set UPSTREAM_RATE_LIMIT=2/m)' : `${limit.count} per ${limit.periodMs / 1000} s`}`,
  );
  if (ignored.length > 0) {
    io.out(`Ignored (the demo uses the stand-in's): ${ignored.join(', ')}`);
  }
  io.out(`Status: curl http://127.0.0.1:${sidecar.adminAddress.port}/status   Stop: Ctrl-C`);
  io.out('');
}
