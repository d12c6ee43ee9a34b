/**
 * The contract between an upstream call (upstream-call.ts) and its caller, the forwarder: the
 * hooks the caller gives every call, what a call shows them (its state, call-states.ts, and the
 * try's own data), and what the answer head decides.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { TimerHandle } from '../clock.js';
import type { AttemptSpan } from '../telemetry/tracing.js';
import type { AbortCause, Attempt } from './attempt-outcome.js';
import type { CallState } from './call-states.js';
import type { SlowReaders } from './slow-readers.js';
import type { BodyTap } from './stages.js';

/** What the answer head decides (the forwarder's rules: 401 replay, stages, bodiless answers). */
export interface HeadDecision {
  /** Swallow the body: a 401 about to be replayed. Nothing is written to the client. */
  replay: boolean;
  /** Headers to write, with the status (an object, or node's flat name, value list); undefined when `replay`. */
  headers?: OutgoingHttpHeaders | string[];
  /** The answer carries no content (204, 304, HEAD): end the client response at its head. */
  bodiless: boolean;
  /** The stages' body taps. */
  taps: BodyTap[];
  /**
   * A stage answered the client itself with this status (a stale entry): the upstream's body is
   * read and dropped, and nothing of it is written.
   */
  served?: number;
}

/**
 * The caller's rules, one object for every call (no closures per request): each hook gets the
 * call, whose `info` carries what the caller needs to know about the request.
 */
export interface UpstreamCallHooks<I> {
  /**
   * Called once with the answer head (status ≥ 200), before anything is written. `headers`
   * as undici read them: name, value, name, value, ... (names as sent).
   */
  onHead(call: CallView<I>, status: number, headers: IncomingHttpHeaders): HeadDecision;
  /** The error that ended the exchange (after classification by the caller). */
  onError(call: CallView<I>, err: Error): Attempt | Error;
  /**
   * The exchange settled (`done` is about to resolve or reject); undici may still hold the
   * request (`isReleased` false) when it was answered before it got a connection.
   */
  onSettled?(call: CallView<I>): void;
  /**
   * The client left after the request was written and the answer is being read and dropped to
   * keep the connection: the caller bounds how long (`stopDraining` aborts it).
   */
  onDraining?(call: CallView<I>): void;
  readonly readers?: SlowReaders; // requests whose client is not reading, bounded
}

/** What the error classification needs to know: the state, and why this side aborted. */
export interface UpstreamCallState {
  /** Was a head seen, written, or is this a 401 to replay (call-states.ts). */
  readonly state: CallState;
  readonly abortedBy: AbortCause | undefined;
  readonly upstreamStatus: number;
  /** The client response was ended (a bodiless answer is complete at its head). */
  readonly clientEnded: boolean;
}

/** What belongs to one try, set by the caller as it dispatches (the exchange keeps the rest). */
export interface AttemptData {
  /** The bounded method label of the metrics. */
  label: string;
  /** The bearer sent: a 401 reports it to the keeper. */
  token: string;
  /** The clock's time at dispatch. */
  started: number;
  /** A 401 may be replayed once with a fresh token (the first try, its body replayable). */
  mayReplay: boolean;
  /** With tracing on: this try's client span. */
  span: AttemptSpan | undefined;
}

/** What the hooks see of a call. */
export interface CallView<I> extends UpstreamCallState, AttemptData {
  /** What the caller's hooks need to know about the request. */
  readonly info: I;
  /** The caller's timer for the answer head; the caller arms and clears it. */
  headDeadline: TimerHandle | undefined;
  /** undici is finished with the request (answered, failed or dropped). */
  readonly isReleased: boolean;
  /** Resolves once it is. */
  readonly released: Promise<void>;
  /** The answer of a client that left is still being read: give up the connection instead. */
  stopDraining(): void;
}
