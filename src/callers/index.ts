/**
 * Caller identity for a shared gateway (docs/configuration.md "Caller identity"), loaded with jose
 * only when `callers.auth` is `jwt`: the keys (keys.ts, from jwks-source.ts), the verifier, the
 * rules and the stage that puts them on the request path. The composition root hands in the
 * dispatcher, the file reader, the clock, the logger and the metric.
 */
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import type { CallerJwtConfig, CallerRule } from '../config/types.js';
import type { ForwardStage } from '../proxy/stages.js';
import type { Logger } from '../telemetry/logger.js';
import { oneReadAtATime, type ReadTextFile } from '../config/credentials.js';
import { fileSource, urlSource } from './jwks-source.js';
import { CallerKeys, type CallerKeysStatus } from './keys.js';
import { CallerRules } from './rules.js';
import { callerStage, type CallerAuthCounts } from './stage.js';
import { CallerVerifier } from './verifier.js';

/** A mounted file is re-read this often (a read, and a compare when unchanged). */
export const FILE_REFRESH_MS = 10_000;

export interface CallerAuth {
  stage: ForwardStage;
  /** A key set is held: until then /readyz says "no caller keys yet". */
  ready(): boolean;
  status(): CallerKeysStatus & { rules: number };
  stop(): void;
}

export interface CallerAuthParts {
  /** For a JWKS URL or discovery: trusts `callers.jwt.caFile` besides the system roots. */
  dispatcher: Dispatcher | undefined;
  readFile: ReadTextFile;
  clock: Clock;
  logger: Logger;
  /** Counts `oauth_sidecar_caller_auth_total`, given the keys to read their age from. */
  counts: (keys: CallerKeys) => CallerAuthCounts;
}

/** The stage and its keys; the first fetch is under way when this returns (readiness waits for it). */
export function startCallerAuth(
  config: { jwt: CallerJwtConfig; rules: readonly CallerRule[] },
  parts: CallerAuthParts,
): CallerAuth {
  const { jwt } = config;
  const readFile = oneReadAtATime(parts.readFile);
  const source =
    jwt.keys.kind === 'file'
      ? fileSource(jwt.keys.file, readFile)
      : urlSource({ jwt, dispatcher: parts.dispatcher!, readFile });
  const keys = new CallerKeys({
    source,
    clock: parts.clock,
    logger: parts.logger,
    ...(jwt.keys.kind === 'file' && { refreshMs: FILE_REFRESH_MS }),
    onChange: () => verifier.forget(),
  });
  const verifier = new CallerVerifier({
    issuer: jwt.issuer,
    audience: jwt.audience,
    getKey: keys.getKey,
    clock: parts.clock,
  });
  const stage = callerStage({
    verifier,
    rules: new CallerRules(config.rules),
    counts: parts.counts(keys),
  });
  void keys.start();
  return {
    stage,
    ready: () => keys.ready,
    status: () => ({ ...keys.status(), rules: config.rules.length }),
    stop: () => keys.stop(),
  };
}
