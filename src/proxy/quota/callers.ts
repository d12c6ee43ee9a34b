/**
 * The callers that share the rate (docs/quota-guard.md "Fair share between callers"): this
 * sidecar's own (`quota.caller`) or, in gateway mode, the one a request names in
 * `quota.callerHeader`; each with the weight and priority `quota.callers` gives it (else 1,
 * `interactive`). Names cost nothing to invent, so they buy nothing: callers not listed count
 * together as one, `other`, once FEW_UNLISTED of them are active; only the listed ones, this
 * sidecar's own, `other` and FEW_UNLISTED recent unlisted names are tracked (memory bounded).
 */
import { CALLER_NAME } from '../../config/quota-parsers.js';
import type { CallerPolicy, NamedCallerPolicy, Priority } from '../../config/types.js';
import { CallerState } from './fair-queue.js';

/**
 * Most unlisted callers with a state of their own at once: a gateway's few unlisted apps are
 * shared between fairly; beyond them a new name is `other`'s while these are active.
 */
export const FEW_UNLISTED = 4;

/** The caller (and metric label) of the unlisted names: neither configured nor this sidecar's own. */
export const OTHER_CALLER = 'other';

/** Most callers `/status` lists (the most recent first). */
const STATUS_CALLERS = 50;

/** One caller as `/status` shows it. */
export interface CallerStatus {
  name: string;
  weight: number;
  priority: Priority;
  /** Asked within the last period (or waits): shares the rate now. */
  active: boolean;
  /** The part of the rate guaranteed to it while active (weight ÷ active weights). */
  share: number;
  queued: number;
}

const DEFAULT_POLICY: CallerPolicy = { weight: 1, priority: 'interactive' };

export interface CallersOptions {
  /** `quota.caller`: who this sidecar serves, and the fallback in gateway mode. */
  own: string;
  /** `quota.callerHeader` (lower case), or undefined: every request is `own`'s. */
  header: string | undefined;
  /** `quota.callers`. */
  policies: readonly NamedCallerPolicy[];
  /** `callers.auth: jwt`: each request names its verified caller (`named`). */
  identified?: boolean;
}

export class Callers {
  readonly #states = new Map<string, CallerState>();
  readonly #own: CallerState;
  /** Every unlisted name together, once FEW_UNLISTED of them are active. */
  readonly #other: CallerState;
  /** The unlisted names with a state of their own (at most FEW_UNLISTED). */
  readonly #loose: CallerState[] = [];
  readonly #header: string | undefined;
  readonly #identified: boolean;
  readonly #policies: ReadonlyMap<string, CallerPolicy>;

  constructor(options: CallersOptions) {
    this.#header = options.header;
    this.#identified = options.identified ?? false;
    this.#policies = new Map(
      options.policies.map(({ name, weight, priority }) => [name, { weight, priority }]),
    );
    this.#own = this.#create(options.own);
    this.#other = this.#states.get(OTHER_CALLER) ?? this.#create(OTHER_CALLER);
  }

  /** This sidecar's own caller (`quota.caller`). */
  get own(): CallerState {
    return this.#own;
  }

  /** True in gateway mode: requests of one process belong to several callers. */
  get several(): boolean {
    return this.#header !== undefined || this.#identified;
  }

  /**
   * The caller a request belongs to (its header's name when valid, else this sidecar's own); an
   * unlisted name is `other`'s while FEW_UNLISTED unlisted callers are active (`now`, `periodMs`:
   * the rate limit's period, as for the shares).
   */
  of(
    headers: Record<string, string | string[] | undefined>,
    now: number,
    periodMs: number,
  ): CallerState {
    if (this.#header === undefined) return this.#own;
    const raw = headers[this.#header];
    if (typeof raw !== 'string') return this.#own;
    // Case folded as `quota.caller` is: `Reports-UI` and `reports-ui` are one caller.
    const value = raw.toLowerCase();
    if (!CALLER_NAME.test(value)) return this.#own;
    return this.named(value, now, periodMs);
  }

  /** The caller of a valid name: a verified caller's rule's, or a header's (`of`). */
  named(name: string, now: number, periodMs: number): CallerState {
    const known = this.#states.get(name);
    if (known !== undefined) return known;
    if (this.#policies.has(name)) return this.#create(name);
    return this.#unlisted(name, now, periodMs);
  }

  /** Waiters that count against `caller`'s half of the queue: every unlisted one's together. */
  waiting(caller: CallerState): number {
    if (caller !== this.#other && !this.#loose.includes(caller)) return caller.waiters.size;
    let total = this.#other.waiters.size;
    for (const c of this.#loose) total += c.waiters.size;
    return total;
  }

  /** Every caller tracked, for shares and `/status`. */
  all(): IterableIterator<CallerState> {
    return this.#states.values();
  }

  /** The bounded metric label of a caller: its name when configured or this sidecar's own. */
  label(caller: CallerState): string {
    return caller === this.#own || this.#policies.has(caller.name) ? caller.name : OTHER_CALLER;
  }

  /** The callers that asked most recently, with their shares of the rate now (`/status`). */
  shares(now: number, periodMs: number): CallerStatus[] {
    const recent = [...this.#states.values()]
      .sort((a, b) => b.lastAsked - a.lastAsked)
      .slice(0, STATUS_CALLERS);
    const total = this.#activeWeight(now, periodMs);
    return recent.map((c) => {
      const active = isActive(c, now, periodMs);
      return {
        name: c.name,
        weight: c.weight,
        priority: c.priority,
        active,
        share: active ? c.weight / total : 0,
        queued: c.waiters.size,
      };
    });
  }

  /** Sum of the weights of the callers sharing the rate now, `caller` included. */
  activeWeight(caller: CallerState, now: number, periodMs: number): number {
    const total = this.#activeWeight(now, periodMs);
    return isActive(caller, now, periodMs) ? total : total + caller.weight;
  }

  #activeWeight(now: number, periodMs: number): number {
    let total = 0;
    for (const c of this.#states.values()) if (isActive(c, now, periodMs)) total += c.weight;
    return total;
  }

  /** A state of its own while fewer than FEW_UNLISTED unlisted callers are active, else `other`. */
  #unlisted(name: string, now: number, periodMs: number): CallerState {
    if (this.#loose.length < FEW_UNLISTED) {
      const state = this.#create(name);
      this.#loose.push(state);
      return state;
    }
    // An idle one's place is free: it waits for nothing, and idle time banks no credit.
    const idle = this.#loose.findIndex((c) => !isActive(c, now, periodMs));
    if (idle === -1) return this.#other;
    this.#states.delete(this.#loose[idle]!.name);
    const state = this.#create(name);
    this.#loose[idle] = state;
    return state;
  }

  #create(name: string): CallerState {
    const policy = this.#policies.get(name) ?? DEFAULT_POLICY;
    const state = new CallerState(name, policy.weight, policy.priority);
    this.#states.set(name, state);
    return state;
  }
}

/** A caller shares the rate while it waits or asked within the last period. */
function isActive(caller: CallerState, now: number, periodMs: number): boolean {
  return caller.waiters.size > 0 || caller.lastAsked > now - periodMs;
}
