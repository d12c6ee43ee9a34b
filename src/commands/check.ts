/** `oauth-sidecar check`: validate config, get one token, print what came back, never the token. */
import { createCredentialsReader } from '../config/credentials.js';
import type { Config } from '../config/types.js';
import { TokenEndpointError } from '../errors.js';
import type { TokenEndpoint } from '../token/types.js';

export interface Io {
  out(line: string): void;
  err(line: string): void;
}

export interface CheckDeps {
  /** The token endpoint client, on a dispatcher the caller closes. */
  endpoint: TokenEndpoint;
}

/** Exit code: 0 when a token came back, 1 otherwise (the reason on stderr). */
export async function runCheck(config: Config, io: Io, deps: CheckDeps): Promise<number> {
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
    return 0;
  } catch (error) {
    const reason =
      error instanceof TokenEndpointError || error instanceof Error ? error.message : String(error);
    io.err(`oauth-sidecar check: failed: ${reason}`);
    return 1;
  }
}
