/**
 * One proxied request, the one object the proxy keeps for it from admission to the request
 * line: the stages see it, and each upstream try (upstream-call.ts, which holds what belongs to
 * that try) carries it. A class with fixed fields: no closure and no other object per request.
 */
import { clientGone, type ClientResponse } from './outcome.js';
import type { RequestSpan } from '../telemetry/tracing.js';
import type { ClientRequest } from './request-body.js';

export class Exchange {
  /** The client's method, as sent. */
  readonly method: string;
  /** The client's path and raw query, as sent (already judged safe and allowed). */
  readonly target: string;
  /** What undici still holds of this request after the forward ended (a 504 still queued). */
  held: Promise<void> | undefined;
  /** With tracing on: the request's server span (each try's own span is its call's). */
  trace: RequestSpan | undefined = undefined;
  /** Upstream attempts so far (a second one is a replay after a 401). */
  attempts = 0;
  /** With `callers.auth: jwt`: the verified caller's rule's name (the quota caller). */
  caller: string | undefined = undefined;
  /** The caller check that refused the request (`expired`, `forbidden`, ...), for the request line. */
  callerCheck: string | undefined = undefined;

  /**
   * @param keepAlive the `Keep-Alive` field value every answer to this request carries: the
   *   listener's decision for a persistent HTTP/1.1 connection (docs/design.md "Bounded work",
   *   listener), undefined otherwise.
   */
  constructor(
    readonly req: ClientRequest,
    readonly res: ClientResponse,
    readonly requestId: string,
    readonly keepAlive: string | undefined = undefined,
  ) {
    this.method = req.method ?? 'GET';
    this.target = req.url ?? '/';
  }

  /** True once the client reset the stream or closed the connection: stop waiting for it. */
  clientGone(): boolean {
    return clientGone(this.req, this.res);
  }

  /** Keep the request counted (against `proxy.maxInFlight`) until `until` settles. */
  hold(until: Promise<void>): void {
    this.held =
      this.held === undefined ? until : Promise.all([this.held, until]).then(() => undefined);
  }
}
