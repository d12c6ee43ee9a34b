/**
 * Graceful drain of the proxy listener (docs/reference.md "Command line"), and the one place that knows
 * whether it began: the request handler and readiness read `isDraining()` from here.
 */
import type { Server } from 'node:http';
import type { Http2Server, Http2Session } from 'node:http2';
import type { Clock } from '../clock.js';
import type { InFlightLimit } from '../proxy/admission.js';
import type { Logger } from '../telemetry/logger.js';

export interface DrainState {
  isDraining: () => boolean;
  /** Mark the drain begun (new requests get 503 `shutting_down`); idempotent. */
  begin: () => void;
  /** True once the drain deadline closed the connections still open (their requests were cut). */
  isCutOff: () => boolean;
  cutOff: () => void;
}

export function createDrainState(): DrainState {
  let draining = false;
  let cut = false;
  return {
    isDraining: () => draining,
    begin() {
      draining = true;
    },
    isCutOff: () => cut,
    cutOff() {
      cut = true;
    },
  };
}

export interface DrainOptions {
  server: Server | Http2Server;
  http2: boolean;
  state: DrainState;
  inFlight: InFlightLimit;
  sessions: ReadonlySet<Http2Session>;
  logger: Logger;
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
}

/**
 * Stop accepting, answer new requests on open connections with 503 `shutting_down`, close idle
 * connections, wait up to `timeoutMs` for in-flight requests, then close whatever is left.
 */
export function createDrain(options: DrainOptions): (timeoutMs?: number) => Promise<void> {
  const { server, state, inFlight, sessions, logger, clock } = options;
  let running: Promise<void> | undefined;

  async function run(timeoutMs: number): Promise<void> {
    state.begin();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    const http1 = options.http2 ? undefined : (server as Server);
    http1?.closeIdleConnections();

    // Keep-alive connections go idle as their last response ends; close them as they do.
    let sweeper: ReturnType<Clock['setTimeout']> | undefined;
    const sweep = () => {
      http1?.closeIdleConnections();
      sweeper = clock.setTimeout(sweep, 50);
    };
    if (http1) sweep();

    let timer: ReturnType<Clock['setTimeout']> | undefined;
    await Promise.race([
      inFlight.whenIdle(),
      new Promise<void>((resolve) => {
        timer = clock.setTimeout(() => {
          logger.warn(
            { inFlight: inFlight.count },
            'drain timed out; closing the remaining connections',
          );
          state.cutOff();
          resolve();
        }, timeoutMs);
      }),
    ]);
    if (timer !== undefined) clock.clearTimeout(timer);
    if (sweeper) clock.clearTimeout(sweeper);
    if (http1) http1.closeAllConnections();
    for (const session of sessions) session.close();
    const forced = clock.setTimeout(() => {
      for (const session of sessions) session.destroy();
    }, 1_000);
    await closed;
    clock.clearTimeout(forced);
    logger.info('proxy drained');
  }

  return (timeoutMs = 10_000) => (running ??= run(timeoutMs));
}
