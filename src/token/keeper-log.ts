/** The keeper's log lines about token requests (never a token or a secret). */
import { TokenEndpointError, errorText, isRejectedGrant } from '../errors.js';
import type { SharedTokenSet } from '../fleet/token-sets.js';
import type { Logger } from '../telemetry/logger.js';
import { errorKind, iso } from './keeper-status.js';
import type { GrantType, TokenSet } from './types.js';

/** A grant succeeded; `renewAt`: when the token is renewed. */
export function logObtained(
  log: Logger,
  grant: GrantType,
  tokenSet: TokenSet,
  state: { refreshTokenHeld: boolean; renewAt: number },
): void {
  const lifetimeSeconds = tokenSet.expiresInSeconds;
  if (tokenSet.lifetimeDefaulted) {
    log.warn(
      { event: 'token', grant, lifetimeSeconds },
      `token endpoint answer had no expiresIn; assuming ${lifetimeSeconds} s`,
    );
  }
  log.info(
    {
      event: 'token',
      grant,
      outcome: 'success',
      lifetimeSeconds,
      refreshTokenHeld: state.refreshTokenHeld,
      nextRenewalAt: iso(state.renewAt),
    },
    'access token obtained',
  );
}

/** A set another process published was adopted from the shared store. */
export function logAdopted(
  log: Logger,
  set: SharedTokenSet,
  generation: number,
  renewAt: number,
): void {
  log.info(
    {
      event: 'token',
      grant: set.grant,
      outcome: 'adopted',
      generation,
      lifetimeSeconds: set.lifetimeSeconds,
      nextRenewalAt: iso(renewAt),
    },
    'access token adopted from the shared store',
  );
}

/** A token request failed; `next` says what the keeper does about it. */
export function logFailure(
  log: Logger,
  grant: GrantType,
  error: unknown,
  state: { consecutiveFailures: number; tokenValid: boolean },
  next: string,
): void {
  log.warn(failureFields(grant, error, state), `token request failed; ${next}`);
}

/** The fields of a failed token request's log line (never a token or a secret). */
function failureFields(
  grant: GrantType,
  error: unknown,
  { consecutiveFailures, tokenValid }: { consecutiveFailures: number; tokenValid: boolean },
): Record<string, unknown> {
  return {
    event: 'token',
    grant,
    outcome: isRejectedGrant(error) ? 'rejected' : 'error',
    errorKind: errorKind(error),
    error: errorText(error),
    status: error instanceof TokenEndpointError ? error.status : undefined,
    oauthError: error instanceof TokenEndpointError ? error.oauthError : undefined,
    consecutiveFailures,
    tokenValid,
  };
}
