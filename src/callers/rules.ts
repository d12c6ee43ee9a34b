/**
 * What a verified caller may do (docs/configuration.md "Caller identity", `callers.rules`): the
 * first rule whose subject matches the token's `sub` decides; it names the quota caller and may
 * limit methods and path prefixes. No matching rule: refused.
 */
import type { CallerRule } from '../config/types.js';

export class CallerRules {
  readonly #rules: readonly CallerRule[];

  constructor(rules: readonly CallerRule[]) {
    this.#rules = rules;
  }

  /**
   * The rule that decides for `subject`: exact, or a prefix (`system:serviceaccount:research:*`
   * matches `system:serviceaccount:research:app`, never `system:serviceaccount:research-x:app`:
   * the prefix is compared as written, separator included).
   */
  ruleFor(subject: string): CallerRule | undefined {
    for (const rule of this.#rules) {
      if (rule.match === 'exact' ? subject === rule.subject : subject.startsWith(rule.subject)) {
        return rule;
      }
    }
    return undefined;
  }
}

/**
 * True when `rule` allows `method` on `target` (the raw request target, already judged safe: no
 * dot segments, no encoded slash, inside a forwarded prefix; proxy/path-safety.ts).
 */
export function ruleAllows(rule: CallerRule, method: string, target: string): boolean {
  if (rule.methods !== undefined && !rule.methods.includes(method.toUpperCase())) return false;
  if (rule.paths === undefined) return true;
  for (const prefix of rule.paths) if (target.startsWith(prefix)) return true;
  return false;
}
