/**
 * How an upstream exchange that failed or was aborted ends (docs/design.md "Proxy"): an outcome
 * once its client saw a head (complete, or cut and logged), else the SidecarError the one
 * error-answer module turns into the client's answer (408, 502, 504) — or the client was gone.
 */
import type { Clock } from '../clock.js';
import { SidecarError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import { GONE_ATTEMPT, cutResult, type Attempt } from './attempt-outcome.js';
import { EgressFailures } from './egress-failure.js';
import type { Exchange } from './exchange.js';
import { ClientGoneError, requestTimeoutError } from './request-body.js';
import { headSeen, headWritten } from './call-states.js';
import type { AttemptData, UpstreamCallState } from './upstream-hooks.js';
import type { UpstreamMetrics } from './upstream-metrics.js';

/** RFC 9110 §6.4.1: 204 and 304 answers never carry content (nor does any answer to HEAD). */
export function bodiless(status: number, method: string): boolean {
  return status === 204 || status === 304 || method === 'HEAD';
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** What the classification reads of the failed try. */
export type FailedAttempt = UpstreamCallState & Pick<AttemptData, 'label' | 'span'>;

/** What it reads of the client request. */
export type FailedRequest = Pick<Exchange, 'method' | 'requestId'>;

export interface AttemptFailuresOptions {
  metrics: UpstreamMetrics;
  logger: Logger;
  clock: Pick<Clock, 'now'>;
  /** `upstream.timeoutMs`: named in the 504. */
  timeoutMs: number;
  /** `proxy.bodyTimeoutMs`: named in the 408. */
  clientBodyTimeoutMs: number;
}

export class AttemptFailures {
  readonly #metrics: UpstreamMetrics;
  readonly #logger: Logger;
  readonly #egressFailures: EgressFailures;
  readonly #timeoutMs: number;
  readonly #clientBodyTimeoutMs: number;

  constructor(options: AttemptFailuresOptions) {
    this.#metrics = options.metrics;
    this.#logger = options.logger;
    this.#egressFailures = new EgressFailures(options.logger, options.clock);
    this.#timeoutMs = options.timeoutMs;
    this.#clientBodyTimeoutMs = options.clientBodyTimeoutMs;
  }

  /**
   * How a failed or aborted exchange ends: an outcome once the client saw a head, else an error.
   * Asked before the call settles, so its state is the one the failure found it in.
   */
  classify(err: Error, call: FailedAttempt, request: FailedRequest): Attempt | Error {
    const { abortedBy, upstreamStatus, state } = call;
    if (!headSeen(state)) this.#metrics.count(call.label, 'error');
    call.span?.end(undefined, abortedBy ?? errorCode(err) ?? err.name);
    if (state === 'replaying') {
      // The discarded 401 body failed to arrive in full; the replay does not need it.
      return { kind: 'answered', upstreamStatus, replay: true };
    }
    if (headWritten(state)) return this.#cut(err, call, request);
    if (abortedBy === 'client' || err instanceof ClientGoneError) return GONE_ATTEMPT;
    if (abortedBy === 'client_body')
      return err instanceof SidecarError ? err : requestTimeoutError(this.#clientBodyTimeoutMs);
    if (abortedBy === 'timeout' || errorCode(err) === 'UND_ERR_HEADERS_TIMEOUT') {
      return new SidecarError(
        'upstream_timeout',
        `no response headers from the upstream within ${this.#timeoutMs} ms`,
        { cause: err },
      );
    }
    return this.#egressFailures.unreachable(err);
  }

  /** A failure after the head was written: the answer was complete, or the client's was cut. */
  #cut(err: Error, call: FailedAttempt, request: FailedRequest): Attempt {
    const { upstreamStatus } = call;
    if (bodiless(upstreamStatus, request.method) && call.clientEnded) {
      // The answer was complete at its head; only the upstream's extra bytes failed.
      return { kind: 'answered', upstreamStatus, replay: false };
    }
    const result = cutResult(call.abortedBy);
    if (result === 'upstream_failed') {
      this.#logger.warn(
        { err, requestId: request.requestId },
        'upstream failed after response headers; client response aborted',
      );
    }
    return { kind: 'cut', upstreamStatus, result };
  }
}
