/**
 * Caller identity on the request path (proxy/stages.ts), first of the stages: before the cache
 * (an unverified caller gets no stored answer) and the quota guard (which shares the rate by the
 * verified caller). No or an invalid token: 401 `caller_unauthenticated`; a verified caller no
 * rule allows: 403 `caller_forbidden`; nothing is forwarded either way. The caller's token is
 * then dropped with every inbound `Authorization` (proxy/headers.ts): never forwarded, logged or
 * traced, and never part of a cache key.
 */
import type { CallerRule } from '../config/types.js';
import { SidecarError } from '../errors.js';
import { overrideOutside } from '../http-fields/method-override.js';
import type { ExchangeView, ForwardStage } from '../proxy/stages.js';
import { ruleAllows, type CallerRules } from './rules.js';
import type { CallerCheck, CallerVerifier, VerifiedCaller } from './verifier.js';

/** `oauth_sidecar_caller_auth_total{result}`: a verified or remembered caller, or the check that refused. */
export type CallerAuthResult = 'verified' | 'remembered' | 'forbidden' | CallerCheck;

/**
 * Counts `oauth_sidecar_caller_auth_total{result}` (telemetry/metrics.ts `LabelTally`: plain
 * numbers, read by the counter when scraped; no labels hashed per request).
 */
export interface CallerAuthCounts {
  count(result: CallerAuthResult): void;
}

export interface CallerStageParts {
  verifier: Pick<CallerVerifier, 'check'>;
  rules: CallerRules;
  counts: CallerAuthCounts;
}

/** The same words for every refused token: which check failed goes to the request line only. */
const UNAUTHENTICATED = 'a valid caller token is required: Authorization: Bearer <token>';

/**
 * RFC 6750 §2.1: `Bearer` then the token (token68: no spaces); the scheme is case-insensitive.
 * The usual spelling is compared as it is (no lowered copy of the scheme per request).
 */
function bearerOf(value: string | undefined): string | undefined {
  if (value === undefined || value.length < 8) return undefined;
  if (!value.startsWith('Bearer ') && value.slice(0, 7).toLowerCase() !== 'bearer ') {
    return undefined;
  }
  const token = value.slice(7).trim();
  return token === '' || token.includes(' ') ? undefined : token;
}

/**
 * Why `rule` does not allow the request, or undefined when it does. A rule that limits methods
 * must allow every method an override field (`X-HTTP-Method-Override`, ...) names as well: the
 * fields are forwarded, and an API that honours them would act on that method.
 */
function refusalBy(rule: CallerRule, exchange: ExchangeView): string | undefined {
  if (!ruleAllows(rule, exchange.method, exchange.target)) {
    return `caller ${rule.caller} may not ${exchange.method} this path`;
  }
  if (rule.methods === undefined) return undefined;
  const tunnelled = overrideOutside(exchange.req.headers, rule.methods);
  return tunnelled === undefined
    ? undefined
    : `caller ${rule.caller} may not tunnel another method through ${tunnelled.field}`;
}

export function callerStage(parts: CallerStageParts): ForwardStage {
  const { verifier, rules, counts } = parts;
  /**
   * The rule of each verified caller, found once: a remembered token comes back as the same
   * object until it is forgotten (and the rules never change), so it costs a lookup, not a walk
   * through the rules. Weak: what the verifier forgets goes with it.
   */
  const ruleOf = new WeakMap<VerifiedCaller, CallerRule | null>();
  function ruleFor(verified: VerifiedCaller): CallerRule | undefined {
    let rule = ruleOf.get(verified);
    if (rule === undefined) {
      rule = rules.ruleFor(verified.subject) ?? null;
      ruleOf.set(verified, rule);
    }
    return rule ?? undefined;
  }

  function refuse(exchange: ExchangeView, check: CallerCheck): never {
    exchange.callerCheck = check;
    counts.count(check);
    throw new SidecarError('caller_unauthenticated', UNAUTHENTICATED);
  }

  /** The rule decides; the request goes on (undefined) as its caller's, or is refused. */
  function decide(
    exchange: ExchangeView,
    verdict: VerifiedCaller | CallerCheck,
    result: 'verified' | 'remembered',
  ): undefined {
    if (typeof verdict === 'string') refuse(exchange, verdict);
    const rule = ruleFor(verdict);
    if (rule !== undefined) exchange.caller = rule.caller;
    const refusal = rule === undefined ? 'no rule admits this caller' : refusalBy(rule, exchange);
    if (refusal !== undefined) {
      exchange.callerCheck = 'forbidden';
      counts.count('forbidden');
      throw new SidecarError('caller_forbidden', refusal);
    }
    counts.count(result);
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
