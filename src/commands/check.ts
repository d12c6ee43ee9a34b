/**
 * `oauth-sidecar check`: validate config, get one token, print what came back, never the token.
 * `check --offline`: the configuration alone (loaded strictly by main.ts), for a configuration CI.
 */
import { systemClock } from '../clock.js';
import { createCredentialsReader } from '../config/credentials.js';
import { featureLine } from '../config/features.js';
import type { ClientCredentials, Config } from '../config/types.js';
import { TokenEndpointError } from '../errors.js';
import { createTokenDispatcher } from '../proxy/dispatcher.js';
import { readCa, tokenEndpointFor } from '../sidecar.js';
import { createLogger } from '../telemetry/logger.js';
import { leaseTtlMs } from '../token/shared.js';
import type { TokenEndpoint } from '../token/types.js';

export interface Io {
  out(line: string): void;
  err(line: string): void;
}

export interface CheckDeps {
  /** The token endpoint client, on a dispatcher the caller closes. */
  endpoint: TokenEndpoint;
  /** With a token store configured: prints `store: ok (...)`, or returns the failure. */
  checkStore?: (credentials: {
    clientId: string;
    clientSecret: string;
  }) => Promise<string | undefined>;
}

/** Exit code: 0 when a token came back, 1 otherwise (the reason on stderr). */
export async function runCheck(config: Config, io: Io, deps: CheckDeps): Promise<number> {
  for (const warning of config.warnings ?? []) io.err(`warning: ${warning}`);
  io.out(`features: ${featureLine(config)}`);
  try {
    const credentials = await createCredentialsReader(config.credentials)();
    const tokens = await deps.endpoint.requestToken({
      grant: 'client_credentials',
      credentials,
    });
    io.out(`token endpoint: ${config.token.url}`);
    io.out('grant: client_credentials');
    io.out('token type: Bearer');
    io.out(
      `expires in: ${tokens.expiresInSeconds} s${tokens.lifetimeDefaulted ? ' (no expiresIn in the answer: default assumed)' : ''}`,
    );
    io.out(`refresh token: ${typeof tokens.refreshToken === 'string' ? 'yes' : 'no'}`);
    if (config.store.url !== undefined && deps.checkStore !== undefined) {
      const failure = await deps.checkStore(credentials);
      if (failure !== undefined) {
        io.err(`oauth-sidecar check: failed: store: ${failure}`);
        return 1;
      }
    }
    return 0;
  } catch (error) {
    const reason =
      error instanceof TokenEndpointError || error instanceof Error ? error.message : String(error);
    io.err(`oauth-sidecar check: failed: ${reason}`);
    return 1;
  }
}

/**
 * `check --offline`: the configuration loaded without a problem (every setting, rule and existing
 * file checked), so the features line, the files not checked because they are absent, and 0. No
 * network: neither the token endpoint, the store, the proxy nor the collector is contacted.
 */
export function checkOffline(config: Config, notChecked: readonly string[], io: Io): number {
  for (const warning of config.warnings ?? []) io.err(`warning: ${warning}`);
  io.out(`features: ${featureLine(config)}`);
  for (const line of notChecked) io.out(`not checked: ${line}`);
  io.out('configuration: ok (offline: no token requested, nothing contacted)');
  return 0;
}

/** `check` as the CLI runs it: the token endpoint client on its own dispatcher, closed at the end. */
export async function check(config: Config, io: Io): Promise<number> {
  const dispatcher = await createTokenDispatcher(config, readCa(config));
  try {
    return await runCheck(config, io, {
      endpoint: tokenEndpointFor(config, dispatcher),
      checkStore: (credentials) => checkStore(config, credentials, io),
    });
  } finally {
    await dispatcher.close();
  }
}

/**
 * With a store: PING, the server's version, and one read of the token-set entry through the same
 * script the keeper runs (proves the ACL user may run scripts on those keys).
 */
async function checkStore(
  config: Config,
  credentials: ClientCredentials,
  io: Io,
): Promise<string | undefined> {
  const url = config.store.url;
  if (url === undefined) return undefined;
  const { createStoreConnection, createTokenSetStore, redactStoreUrl, STORE_SCRIPTS } =
    await import('../fleet/index.js');
  // A one-shot command may wait for the connection (TLS, DNS) longer than a serving process would.
  const connection = createStoreConnection({
    url,
    mode: config.store.mode,
    sentinelPrimary: config.store.sentinelPrimary,
    sentinelPassword: config.store.sentinelPassword,
    keyPrefix: config.store.keyPrefix,
    logger: createLogger({ level: 'silent' }),
    clock: systemClock,
    commandTimeoutMs: 5_000,
    scripts: STORE_SCRIPTS,
  });
  try {
    const version = await connection.probe();
    await createTokenSetStore({
      connection,
      leaseTtlMs: leaseTtlMs(config.token.timeoutMs),
      keyPrefix: config.store.keyPrefix,
      tokenUrl: config.token.url,
      scopes: config.token.scopes,
      readIdentity: () => Promise.resolve(credentials),
      now: () => Date.now(),
    }).read();
    const { mode, nodes } = connection.health();
    const where = mode === 'standalone' ? '' : `, ${mode}: ${nodes.join(',')}`;
    io.out(`store: ok (redis ${version}${where})`);
    return undefined;
  } catch (error) {
    return `${redactStoreUrl(url)}: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    await connection.close();
  }
}
