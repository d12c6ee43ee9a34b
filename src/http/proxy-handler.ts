/**
 * One proxied request, start to end, as the proxy listener's node request listener: request id,
 * admission (proxy/admission.ts: the refusals and the in-flight and body slots), the forwarder,
 * the error answer (answers.ts), the request line. No router: the listener serves
 * one route, and Hono's Request/Context would cost every forwarded request (docs/design.md "Proxy").
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import { SidecarError } from '../errors.js';
import { admitRequest, type AdmissionRules } from '../proxy/admission.js';
import { Exchange } from '../proxy/exchange.js';
import type { Forwarder } from '../proxy/forwarder.js';
import {
  CLIENT_GONE,
  clientGone,
  type ClientResponse,
  type ForwardOutcome,
} from '../proxy/outcome.js';
import type { ClientRequest } from '../proxy/request-body.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { answerError, type AnswerOptions } from './answers.js';
import { REQUEST_ID_HEADER, resolveRequestId } from './request-id.js';
import type { RequestLog } from './request-log.js';
import type { RequestSpan, Tracing } from '../telemetry/tracing.js';

export interface ProxyHandlerOptions extends AdmissionRules {
  forwarder: Forwarder;
  logger: Logger;
  /** The request line writer; undefined when `info` is off (one line per request otherwise). */
  requestLog: RequestLog | undefined;
  metrics: Pick<SidecarMetrics, 'proxyRejected'>;
  /** True once the drain deadline cut the connections still open: their requests log so. */
  isCutOff?: () => boolean;
  clock?: Pick<Clock, 'now'>;
  /** Request id generator; crypto.randomUUID by default. */
  generateRequestId?: () => string;
  /** With tracing on: a server span per request (telemetry/tracing.ts). */
  tracing?: Pick<Tracing, 'request'> | undefined;
}

/**
 * `keepAlive`: the `Keep-Alive` value the listener advertises on this persistent HTTP/1.1
 * connection (every answer carries it), undefined when the answer closes it or on h2.
 */
export type ProxyHandler = (
  req: ClientRequest,
  res: ClientResponse,
  keepAlive?: string,
) => Promise<void>;

/** How a request was answered: forwarded (its outcome), or by the sidecar (its error code). */
interface Handled {
  outcome?: ForwardOutcome;
  status: number;
  code?: string;
  /** The exchange, once admitted: its verified caller and the caller check that refused it. */
  exchange?: Exchange;
}

/** Admit the request and forward it, or answer the refusal; its slots are given back. */
async function admitAndForward(
  req: ClientRequest,
  res: ClientResponse,
  context: { target: string; requestId: string; keepAlive?: string; span?: RequestSpan },
  options: ProxyHandlerOptions,
  errorOptions: AnswerOptions,
): Promise<Handled> {
  const { target, requestId, keepAlive } = context;
  const admitted = admitRequest(req, target, options);
  if (admitted instanceof SidecarError) {
    return answerError(res, admitted, requestId, errorOptions, keepAlive);
  }
  const releaseBodySlot = typeof admitted === 'function' ? admitted : undefined;
  const exchange = new Exchange(req, res, requestId, keepAlive);
  exchange.trace = context.span;
  try {
    const outcome = await options.forwarder.forward(exchange);
    return { outcome, status: outcome.status, exchange };
  } catch (error) {
    const { status, code } = answerError(res, error, requestId, errorOptions, keepAlive);
    return { status, code, exchange };
  } finally {
    releaseBodySlot?.();
    // A request undici still holds in its pool stays counted until it lets go of it.
    const { inFlight } = options;
    if (exchange.held === undefined) inFlight.release();
    else void exchange.held.then(() => inFlight.release());
  }
}

/**
 * The request line's `result` (none when complete). A request the sidecar closed at the drain
 * deadline is `drain_deadline`, not the client's leaving; 444 when nothing was sent (nginx's
 * "closed without a response").
 */
function resultOf(
  handled: Handled,
  isCutOff: (() => boolean) | undefined,
): { result?: string; status: number } {
  const { outcome, status } = handled;
  const result =
    outcome !== undefined && outcome.result !== 'complete' ? outcome.result : undefined;
  if (result !== 'client_closed' || isCutOff?.() !== true) return { result, status };
  return { result: 'drain_deadline', status: status === CLIENT_GONE.status ? 444 : status };
}

export function createProxyHandler(options: ProxyHandlerOptions): ProxyHandler {
  const { requestLog } = options;
  const now = options.clock ? () => options.clock!.now() : Date.now;
  const generate = options.generateRequestId ?? randomUUID;
  const errorOptions = { logger: options.logger, metrics: options.metrics };

  return async function handleProxyRequest(req, res, keepAlive) {
    const started = now();
    const requestId = resolveRequestId(req.headers[REQUEST_ID_HEADER], generate);
    // The raw target: nothing parsed or rewrote it before this listener.
    const target = req.url ?? '';
    const span = options.tracing?.request(req.headers, req.method ?? '', target);
    // h2: a RST_STREAM read with or just after the HEADERS is processed within two macrotasks;
    // a stream reset by then takes no slot and nothing is forwarded (docs/benchmarks.md, the
    // floods section). One already reset (a storm's backlog) skips the wait.
    if ('stream' in res && !res.stream.destroyed) {
      await new Promise<void>((resolve) => setImmediate(setImmediate, resolve));
    }
    const handled: Handled = clientGone(req, res)
      ? { outcome: CLIENT_GONE, status: CLIENT_GONE.status }
      : await admitAndForward(
          req,
          res,
          { target, requestId, keepAlive, span },
          options,
          errorOptions,
        );
    const { result, status } = resultOf(handled, options.isCutOff);
    const caller = handled.exchange?.caller;
    span?.end(status, handled.code, caller);
    requestLog?.write({
      requestId,
      method: req.method ?? '',
      target,
      status,
      durationMs: now() - started,
      upstreamStatus: handled.outcome?.upstreamStatus,
      replayed: handled.outcome?.replayed ?? false,
      result,
      code: handled.code,
      caller,
      callerCheck: handled.exchange?.callerCheck,
    });
  };
}
