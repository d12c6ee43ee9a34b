import { CLIENT_GONE, type ForwardOutcome } from './outcome.js';
import type { AbortCause, Attempt, CutResult } from './upstream-call.js';

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
