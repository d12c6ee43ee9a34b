/**
 * One proxied request, start to end, as the proxy listener's node request listener: request id,
 * the refusals (header count, two Hosts, path safety, method, drain, `proxy.maxInFlight`), the
 * forwarder, the error answer (answers.ts), the request line. No router: the listener serves
 * one route, and Hono's Request/Context would cost every forwarded request (docs/design.md "Proxy").
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import { overloadedError, SidecarError } from '../errors.js';
import { countHeaderFields, type InFlightLimit } from '../proxy/admission.js';
import { Exchange } from '../proxy/exchange.js';
import type { Forwarder } from '../proxy/forwarder.js';
import {
  CLIENT_GONE,
  clientGone,
  type ClientResponse,
  type ForwardOutcome,
} from '../proxy/outcome.js';
import type { ClientRequest } from '../proxy/request-body.js';
import { checkRequestTarget } from '../proxy/path-safety.js';
import { hasNoBody, holdWhileBodyArrives } from '../proxy/request-body.js';
import type { Logger } from '../telemetry/logger.js';
import type { SidecarMetrics } from '../telemetry/metrics.js';
import { answerError } from './answers.js';
import { REQUEST_ID_HEADER, resolveRequestId } from './request-id.js';
import type { RequestLog } from './request-log.js';
import type { Tracing } from '../telemetry/tracing.js';

export interface ProxyHandlerOptions {
  /** Allowed path prefixes (`upstream.pathPrefixes`). */
  prefixes: readonly string[];
  forwarder: Forwarder;
  logger: Logger;
  /** The request line writer; undefined when `info` is off (one line per request otherwise). */
  requestLog: RequestLog | undefined;
  metrics: Pick<SidecarMetrics, 'proxyRejected'>;
  /** True once shutdown began: new requests get 503 `shutting_down`. */
  isDraining: () => boolean;
  /** True once the drain deadline cut the connections still open: their requests log so. */
  isCutOff?: () => boolean;
  /** `proxy.maxHeaders`: header field lines per request; more get 431. */
  maxHeaders: number;
  /** `proxy.maxInFlight`: a request that finds it full gets 503 `overloaded` at once. */
  inFlight: InFlightLimit;
  /**
   * Half of `proxy.maxInFlight`: the most requests still receiving their body; one more that
   * may carry a body gets 503 `overloaded` (docs/design.md "Bounded work"). Default: no such limit.
   */
  receivingBodies?: InFlightLimit;
  clock?: Pick<Clock, 'now'>;
  /** Request id generator; crypto.randomUUID by default. */
  generateRequestId?: () => string;
  /** With tracing on: a server span per request (telemetry/tracing.ts). */
  tracing?: Pick<Tracing, 'request'> | undefined;
}

export type ProxyHandler = (req: ClientRequest, res: ClientResponse) => Promise<void>;

/** TRACE would echo the injected bearer back to the caller; CONNECT would make this a tunnel. */
const REFUSED_METHODS = new Set(['TRACE', 'CONNECT', 'TRACK']);

/** Throws the SidecarError that refuses the request before anything is forwarded, if any. */
function refusal(
  req: ClientRequest,
  rawTarget: string,
  options: ProxyHandlerOptions,
): SidecarError | undefined {
  const { fields, hosts } = countHeaderFields(req.rawHeaders);
  if (fields > options.maxHeaders) {
    return new SidecarError(
      'request_headers_too_large',
      `more than ${options.maxHeaders} header fields`,
    );
  }
  if (hosts > 1) return new SidecarError('bad_request', 'more than one Host header');
  // Judged on the raw target: a parsed URL is already normalised (docs/design.md "Proxy").
  const verdict = checkRequestTarget(rawTarget, options.prefixes);
  if (!verdict.ok) return new SidecarError(verdict.code, verdict.reason);
  const method = req.method ?? '';
  if (REFUSED_METHODS.has(method.toUpperCase())) {
    return new SidecarError('method_not_allowed', `${method} is not forwarded`);
  }
  if (options.isDraining()) {
    return new SidecarError(
      'shutting_down',
      'the sidecar is shutting down; retry on another instance',
    );
  }
  return undefined;
}

/**
 * The refusal, or the request holds an in-flight slot (and a body slot: the function that gives
 * it back). No object per request: this runs for every one.
 */
function admit(
  req: ClientRequest,
  target: string,
  options: ProxyHandlerOptions,
): SidecarError | (() => void) | undefined {
  const refused = refusal(req, target, options);
  if (refused !== undefined) return refused;
  const { inFlight, receivingBodies } = options;
  if (!inFlight.tryAcquire()) {
    return overloadedError(`${inFlight.max} requests are already in progress; retry shortly`);
  }
  if (receivingBodies === undefined || hasNoBody(req)) return undefined;
  // Slow bodies cannot take every slot: the other half stays for requests ready to go.
  const release = holdWhileBodyArrives(req, receivingBodies);
  if (release !== undefined) return release;
  inFlight.release();
  return overloadedError(
    `${receivingBodies.max} requests are already sending their body; retry shortly`,
  );
}

export function createProxyHandler(options: ProxyHandlerOptions): ProxyHandler {
  const { forwarder, requestLog, inFlight } = options;
  const now = options.clock ? () => options.clock!.now() : Date.now;
  const generate = options.generateRequestId ?? randomUUID;
  const errorOptions = { logger: options.logger, metrics: options.metrics };

  return async function handleProxyRequest(req, res) {
    const started = now();
    const requestId = resolveRequestId(req.headers[REQUEST_ID_HEADER], generate);
    // The raw target: nothing parsed or rewrote it before this listener.
    const target = req.url ?? '';
    const span = options.tracing?.request(req.headers, req.method ?? '', target);
    let outcome: ForwardOutcome | undefined;
    let status: number;
    let code: string | undefined;
    // h2: a RST_STREAM read with or just after the HEADERS is processed within two macrotasks;
    // a stream reset by then takes no slot and nothing is forwarded (docs/benchmarks.md, the
    // floods section). One already reset (a storm's backlog) skips the wait.
    if ('stream' in res && !res.stream.destroyed) {
      await new Promise<void>((resolve) => setImmediate(setImmediate, resolve));
    }
    if (clientGone(req, res)) {
      outcome = CLIENT_GONE;
      status = CLIENT_GONE.status;
    } else {
      const admitted = admit(req, target, options);
      const refused = admitted instanceof SidecarError ? admitted : undefined;
      const releaseBodySlot = typeof admitted === 'function' ? admitted : undefined;
      if (refused !== undefined) {
        ({ status, code } = answerError(res, refused, requestId, errorOptions));
      } else {
        const exchange = new Exchange(req, res, requestId);
        exchange.trace = span;
        try {
          outcome = await forwarder.forward(exchange);
          status = outcome.status;
        } catch (error) {
          ({ status, code } = answerError(res, error, requestId, errorOptions));
        } finally {
          releaseBodySlot?.();
          // A request undici still holds in its pool stays counted until it lets go of it.
          if (exchange.held === undefined) inFlight.release();
          else void exchange.held.then(() => inFlight.release());
        }
      }
    }
    let result: string | undefined =
      outcome !== undefined && outcome.result !== 'complete' ? outcome.result : undefined;
    if (result === 'client_closed' && options.isCutOff?.() === true) {
      // The sidecar closed it at the drain deadline, not the client; 444 when nothing was sent
      // (nginx's "closed without a response").
      result = 'drain_deadline';
      if (status === CLIENT_GONE.status) status = 444;
    }
    span?.end(status, code);
    requestLog?.write({
      requestId,
      method: req.method ?? '',
      target,
      status,
      durationMs: now() - started,
      upstreamStatus: outcome?.upstreamStatus,
      replayed: outcome?.replayed ?? false,
      result,
      code,
    });
  };
}
