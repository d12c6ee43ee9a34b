import { CLIENT_GONE, type ForwardOutcome } from './outcome.js';
import type { Attempt } from './upstream-call.js';

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
