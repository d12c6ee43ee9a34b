/**
 * Caller identity on the request path (proxy/stages.ts), first of the stages: before the cache
 * (an unverified caller gets no stored answer) and the quota guard (which shares the rate by the
 * verified caller). No or an invalid token: 401 `caller_unauthenticated`; a verified caller no
 * rule allows: 403 `caller_forbidden`; nothing is forwarded either way. The caller's token is
 * then dropped with every inbound `Authorization` (proxy/headers.ts): never forwarded, logged or
 * traced, and never part of a cache key.
 */
import { SidecarError } from '../errors.js';
import type { ExchangeView, ForwardStage } from '../proxy/stages.js';
import { ruleAllows, type CallerRules } from './rules.js';
import type { CallerCheck, CallerVerifier, VerifiedCaller } from './verifier.js';

/** `oauth_sidecar_caller_auth_total{result}`: a verified or remembered caller, or the check that refused. */
export type CallerAuthResult = 'verified' | 'remembered' | 'forbidden' | CallerCheck;

/** prom-client's `Counter<'result'>`: one `labels()` child per result, bound once (prom-client still hashes the labels at each `inc`). */
export interface CallerAuthCounter {
  labels(labels: { result: CallerAuthResult }): { inc(): void };
}

export interface CallerStageParts {
  verifier: Pick<CallerVerifier, 'check'>;
  rules: CallerRules;
  counter: CallerAuthCounter;
}

/** The same words for every refused token: which check failed goes to the request line only. */
const UNAUTHENTICATED = 'a valid caller token is required: Authorization: Bearer <token>';

/** RFC 6750 §2.1: `Bearer` then the token (token68: no spaces); the scheme is case-insensitive. */
function bearerOf(value: string | undefined): string | undefined {
  if (value === undefined || value.length < 8) return undefined;
  if (value.slice(0, 7).toLowerCase() !== 'bearer ') return undefined;
  const token = value.slice(7).trim();
  return token === '' || token.includes(' ') ? undefined : token;
}

export function callerStage(parts: CallerStageParts): ForwardStage {
  const { verifier, rules, counter } = parts;
  const children = new Map<CallerAuthResult, { inc(): void }>();
  function count(result: CallerAuthResult): void {
    let child = children.get(result);
    if (child === undefined) {
      child = counter.labels({ result });
      children.set(result, child);
    }
    child.inc();
  }

  function refuse(exchange: ExchangeView, check: CallerCheck): never {
    exchange.callerCheck = check;
    count(check);
    throw new SidecarError('caller_unauthenticated', UNAUTHENTICATED);
  }

  /** The rule decides; the request goes on (undefined) as its caller's, or is refused. */
  function decide(
    exchange: ExchangeView,
    verdict: VerifiedCaller | CallerCheck,
    result: 'verified' | 'remembered',
  ): undefined {
    if (typeof verdict === 'string') refuse(exchange, verdict);
    const rule = rules.ruleFor(verdict.subject);
    if (rule !== undefined) exchange.caller = rule.caller;
    if (rule === undefined || !ruleAllows(rule, exchange.method, exchange.target)) {
      exchange.callerCheck = 'forbidden';
      count('forbidden');
      throw new SidecarError(
        'caller_forbidden',
        rule === undefined
          ? 'no rule admits this caller'
          : `caller ${rule.caller} may not ${exchange.method} this path`,
      );
    }
    count(result);
    return undefined;
  }

  return {
    beforeUpstream(exchange) {
      const header = exchange.req.headers.authorization;
      const token = bearerOf(typeof header === 'string' ? header : undefined);
      if (token === undefined) refuse(exchange, header === undefined ? 'missing' : 'malformed');
      const verdict = verifier.check(token);
      if (verdict instanceof Promise) {
        return verdict.then((v) => decide(exchange, v, 'verified'));
      }
      return decide(exchange, verdict, typeof verdict === 'string' ? 'verified' : 'remembered');
    },
  };
}
