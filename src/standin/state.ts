/**
 * The stand-in's state: built once from its options (the defaults a test relies on), shared by the
 * token endpoint, the API routes and the test knobs; and which injected fault the next token
 * request suffers.
 */
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../clock.js';
import { Timers } from './http.js';
import { createCallerIssuer, type CallerIssuer } from './issuer.js';
import { TokenStore } from './tokens.js';
import type {
  RecordedApiRequest,
  RecordedIssuerRequest,
  RecordedTokenRequest,
  StandinOptions,
  TokenFault,
} from './types.js';

/** The stand-in's mutable state, shared by the token endpoint, the API routes and the test knobs. */
export interface StandinState {
  clientId: string;
  clientSecret: string;
  tokenStatus: 200 | 201;
  readonly tokens: TokenStore;
  readonly tokenRequests: RecordedTokenRequest[];
  readonly apiRequests: RecordedApiRequest[];
  nullRefreshTokenNext: number;
  omitRefreshTokenNext: number;
  readonly faultQueue: { fault: TokenFault; remaining: number }[];
  randomFault: { fault: TokenFault; ratio: number } | undefined;
  /** API paths answered with an error status (by prefix) until cleared. */
  readonly apiFaults: Map<string, { status: number; retryAfter: string | undefined }>;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly logger: Logger | undefined;
  readonly issuer: CallerIssuer;
  readonly issuerRequests: RecordedIssuerRequest[];
  /** The bearer discovery and keys want, if any. */
  issuerReaderToken: string | undefined;
}

/** The fault the next token request suffers, if any: queued ones first, then the random one. */
export function takeFault(state: StandinState): TokenFault | undefined {
  const head = state.faultQueue[0];
  if (head !== undefined) {
    head.remaining -= 1;
    if (head.remaining <= 0) state.faultQueue.shift();
    return head.fault;
  }
  if (state.randomFault !== undefined && Math.random() < state.randomFault.ratio) {
    return state.randomFault.fault;
  }
  return undefined;
}

/** A fresh state: client `demo-client`/`demo-secret`, answers 201, tokens of 1799 s, no fault. */
export async function createState(options: StandinOptions): Promise<StandinState> {
  const clock = options.clock ?? systemClock;
  return {
    clientId: options.clientId ?? 'demo-client',
    clientSecret: options.clientSecret ?? 'demo-secret',
    tokenStatus: options.tokenStatus ?? 201,
    tokens: new TokenStore(() => clock.now(), options.tokenLifetimeSeconds ?? 1799),
    tokenRequests: [],
    apiRequests: [],
    nullRefreshTokenNext: 0,
    omitRefreshTokenNext: 0,
    faultQueue: [],
    randomFault: undefined,
    apiFaults: new Map(),
    clock,
    timers: new Timers(clock),
    logger: options.logger,
    issuer: await createCallerIssuer(options.callerKeyPem),
    issuerRequests: [],
    issuerReaderToken: options.issuerReaderToken,
  };
}
