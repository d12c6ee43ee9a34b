/**
 * The callers that share the rate (docs/quota-guard.md "Fair share between callers"): this
 * sidecar's own (`quota.caller`) or, in gateway mode, the one a request names in
 * `quota.callerHeader`; each with the weight and priority `quota.callers` gives it (else 1,
 * `interactive`). Bounded: at most MAX_CALLERS are tracked; idle ones are forgotten first.
 */
import { CALLER_NAME } from '../../config/quota-parsers.js';
import type { CallerPolicy, NamedCallerPolicy, Priority } from '../../config/types.js';
import { CallerState } from './fair-queue.js';

/** Most callers tracked at once; beyond it new names share the state of `other`. */
export const MAX_CALLERS = 1_000;

/** The metric label of callers that are neither configured nor this sidecar's own. */
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
}

export class Callers {
  readonly #states = new Map<string, CallerState>();
  readonly #own: CallerState;
  readonly #header: string | undefined;
  readonly #policies: ReadonlyMap<string, CallerPolicy>;

  constructor(options: CallersOptions) {
    this.#header = options.header;
    this.#policies = new Map(
      options.policies.map(({ name, weight, priority }) => [name, { weight, priority }]),
    );
    this.#own = this.#create(options.own);
  }

  /** This sidecar's own caller (`quota.caller`). */
  get own(): CallerState {
    return this.#own;
  }

  /** True in gateway mode: requests of one process belong to several callers. */
  get several(): boolean {
    return this.#header !== undefined;
  }

  /** The caller a request belongs to (its header's name when valid, else this sidecar's own). */
  of(headers: Record<string, string | string[] | undefined>): CallerState {
    if (this.#header === undefined) return this.#own;
    const raw = headers[this.#header];
    if (typeof raw !== 'string') return this.#own;
    // Case folded as `quota.caller` is: `Reports-UI` and `reports-ui` are one caller.
    const value = raw.toLowerCase();
    if (!CALLER_NAME.test(value)) return this.#own;
    return this.#states.get(value) ?? this.#admit(value);
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

  #admit(name: string): CallerState {
    if (this.#states.size >= MAX_CALLERS) this.#forgetIdle();
    if (this.#states.size >= MAX_CALLERS)
      return this.#states.get(OTHER_CALLER) ?? this.#create(OTHER_CALLER);
    return this.#create(name);
  }

  #create(name: string): CallerState {
    const policy = this.#policies.get(name) ?? DEFAULT_POLICY;
    const state = new CallerState(name, policy.weight, policy.priority);
    this.#states.set(name, state);
    return state;
  }

  /** Forget callers that wait for nothing and are not configured: the least recent half. */
  #forgetIdle(): void {
    const idle = [...this.#states.values()]
      .filter((c) => c !== this.#own && c.waiters.size === 0 && !this.#policies.has(c.name))
      .sort((a, b) => a.lastAsked - b.lastAsked);
    for (const caller of idle.slice(0, Math.ceil(idle.length / 2)))
      this.#states.delete(caller.name);
  }
}

/** A caller shares the rate while it waits or asked within the last period. */
function isActive(caller: CallerState, now: number, periodMs: number): boolean {
  return caller.waiters.size > 0 || caller.lastAsked > now - periodMs;
}
