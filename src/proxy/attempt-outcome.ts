/**
 * What one upstream attempt ends as (upstream-call.ts settles with it), and the forwarder's
 * outcome of the last one.
 */
import { CLIENT_GONE, type ForwardOutcome } from './outcome.js';

export type Attempt =
  /** `status`: what the client got when a stage answered instead of the upstream. */
  | { kind: 'answered'; upstreamStatus: number; replay: boolean; status?: number }
  | { kind: 'cut'; upstreamStatus: number; result: CutResult }
  | { kind: 'client_gone' };

/** Why the exchange was aborted from this side, if it was. */
export type AbortCause = 'timeout' | 'client' | 'client_body' | 'client_slow';

// How an answer cut short after its head ended (the request log's `result`).
export type CutResult = 'client_closed' | 'client_too_slow' | 'upstream_failed';

/** The attempt of a client that left: nothing more happens for it. */
export const GONE_ATTEMPT: Attempt = Object.freeze({ kind: 'client_gone' });

/** What an answer cut after its head is logged as, by who aborted it (nobody: the upstream failed). */
export function cutResult(abortedBy: AbortCause | undefined): CutResult {
  if (abortedBy === 'client') return 'client_closed';
  return abortedBy === 'client_slow' ? 'client_too_slow' : 'upstream_failed';
}

/** The forwarder's outcome of the last attempt. */
export function outcomeOf(attempt: Attempt, replayed: boolean): ForwardOutcome {
  switch (attempt.kind) {
    case 'answered':
      return {
        status: attempt.status ?? attempt.upstreamStatus,
        upstreamStatus: attempt.upstreamStatus,
        replayed,
        result: 'complete',
      };
    case 'cut':
      return {
        status: attempt.upstreamStatus,
        upstreamStatus: attempt.upstreamStatus,
        replayed,
        result: attempt.result,
      };
    case 'client_gone':
      return replayed ? { ...CLIENT_GONE, replayed } : CLIENT_GONE;
  }
}
