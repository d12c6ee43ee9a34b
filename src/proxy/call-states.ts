/**
 * The request path's states: the one value an upstream call (upstream-call.ts) is in, and every
 * transition it may take (docs/design.md "The request path's states", which a test checks against
 * `NEXT`). What the error classification and the caller's hooks need to know (was a head written,
 * is this a 401 to replay, has undici let go) is read from the state, not kept beside it.
 */

export type CallState =
  /** Dispatched; undici has not handed over its controller (no connection yet). */
  | 'queued'
  /** Settled while queued: undici drops it unsent the moment a connection takes it. */
  | 'dropping'
  /** undici holds the controller: the request is being written or its answer head awaited. */
  | 'sent'
  /** The head is written to the client; every body chunk goes to it, with backpressure. */
  | 'streaming'
  /** A 204, 304 or HEAD answer: the client response ended at its head; the body is dropped. */
  | 'bodiless'
  /** A 401 the caller replays with a fresh token: nothing is written, the body is dropped. */
  | 'replaying'
  /** A stage answered the client itself (a stale entry): the upstream's body is dropped. */
  | 'served'
  /** The upstream's answer ended; the client response is still handing over its last bytes. */
  | 'finishing'
  /** Settled: the client left after the request was written; the answer is read and dropped. */
  | 'draining'
  /** Settled: the client left while a tap owns the answer; it is read on for the tap alone. */
  | 'orphaned'
  /** Settled, and undici is finished with the request. */
  | 'done';

/** Every transition: a state's possible next states (docs/design.md lists the same). */
export const NEXT: { readonly [S in CallState]: readonly CallState[] } = {
  queued: ['sent', 'dropping', 'done'],
  dropping: ['done'],
  sent: ['streaming', 'bodiless', 'replaying', 'served', 'draining', 'done'],
  streaming: ['finishing', 'draining', 'orphaned', 'done'],
  bodiless: ['draining', 'done'],
  replaying: ['draining', 'done'],
  served: ['draining', 'done'],
  finishing: ['done'],
  draining: ['done'],
  orphaned: ['done'],
  done: [],
};

/**
 * The states as small integers, the form a call keeps its state in: the transition check is an
 * array load and a mask, cheaper than checking names against `NEXT` (the figures:
 * docs/benchmarks.md "Hot path", `bench/upstream-call.mjs`).
 */
export const STATE = {
  queued: 0,
  dropping: 1,
  sent: 2,
  streaming: 3,
  bodiless: 4,
  replaying: 5,
  served: 6,
  finishing: 7,
  draining: 8,
  orphaned: 9,
  done: 10,
} as const satisfies { readonly [S in CallState]: number };

export type StateCode = (typeof STATE)[CallState];

/** A state's name by its code. */
export const STATE_NAMES = Object.keys(STATE) as readonly CallState[];

const bit = (state: CallState): number => 1 << STATE[state];

/** By code: the mask of the codes `NEXT` allows next. */
const ALLOWED: readonly number[] = STATE_NAMES.map((from) =>
  NEXT[from].reduce((mask, to) => mask | bit(to), 0),
);

const SETTLED = bit('done') | bit('draining') | bit('orphaned') | bit('dropping');
const RELEASED = bit('done') | bit('finishing');

/** A transition `NEXT` does not list: a bug in the call, never a condition of the wire. */
export class IllegalTransitionError extends Error {
  constructor(from: StateCode, to: StateCode) {
    super(`an upstream call cannot go from ${STATE_NAMES[from]} to ${STATE_NAMES[to]}`);
    this.name = 'IllegalTransitionError';
  }
}

/** Checked on every transition. */
export function checkTransition(from: StateCode, to: StateCode): void {
  if (((ALLOWED[from] ?? 0) & (1 << to)) === 0) throw new IllegalTransitionError(from, to);
}

/** The exchange has settled (its `done` resolved or rejected); undici may still hold it. */
export function isSettled(state: StateCode): boolean {
  return (SETTLED & (1 << state)) !== 0;
}

/** undici is finished with the request (answered, failed or dropped). */
export function isReleased(state: StateCode): boolean {
  return (RELEASED & (1 << state)) !== 0;
}

// What the hooks read of a call's state, by name (asked before the call settles).

/** The upstream's answer head arrived (a status of at least 200). */
export function headSeen(state: CallState): boolean {
  return state !== 'queued' && state !== 'sent' && state !== 'dropping';
}

/** The answer's head was written to the client. */
export function headWritten(state: CallState): boolean {
  return state === 'streaming' || state === 'finishing' || state === 'bodiless';
}
