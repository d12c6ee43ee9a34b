/**
 * The API could not be reached because of the egress proxy (docs/runbook.md "Egress proxy"):
 * the 502 `upstream_unreachable` names the proxy, its answer and what to fix, and one log line
 * says so at most every {@link EGRESS_LOG_EVERY_MS}, however many requests fail meanwhile.
 */
import type { Clock } from '../clock.js';
import { EgressProxyError, SidecarError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';

/** Shortest interval between two log lines about the egress proxy. */
export const EGRESS_LOG_EVERY_MS = 10_000;

/** The EgressProxyError `err` is or was caused by (undici may wrap it), if any. */
export function egressFailureOf(err: unknown): EgressProxyError | undefined {
  let inner = err;
  for (let depth = 0; depth < 4 && inner instanceof Error; depth++) {
    if (inner instanceof EgressProxyError) return inner;
    inner = inner.cause;
  }
  return undefined;
}

export class EgressFailures {
  readonly #logger: Logger;
  readonly #clock: Pick<Clock, 'now'>;
  #loggedAt = Number.NEGATIVE_INFINITY;
  #suppressed = 0;

  constructor(logger: Logger, clock: Pick<Clock, 'now'>) {
    this.#logger = logger;
    this.#clock = clock;
  }

  /**
   * The client's answer when the API could not be reached: naming the egress proxy when it was
   * the cause, then logged unless a line was written in the last interval.
   */
  unreachable(err: Error): SidecarError {
    const failure = egressFailureOf(err);
    if (failure === undefined) {
      return new SidecarError('upstream_unreachable', 'the upstream could not be reached', {
        cause: err,
      });
    }
    const now = this.#clock.now();
    if (now - this.#loggedAt >= EGRESS_LOG_EVERY_MS) {
      this.#logger.warn(
        {
          event: 'egress_proxy',
          proxy: failure.proxy,
          proxyStatus: failure.status,
          suppressed: this.#suppressed,
        },
        `the API was not reached: ${failure.message}`,
      );
      this.#loggedAt = now;
      this.#suppressed = 0;
    } else this.#suppressed += 1;
    return new SidecarError('upstream_unreachable', failure.message, { cause: err });
  }
}
