/**
 * Hooks other features hang on the request path (the quota guard, the response cache), so they
 * add work only where they are configured. The forwarder calls them at two places, marked
 * "STAGE HOOK" (stage-runner.ts runs them); with no stage configured both places cost one check.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Exchange } from './exchange.js';
import type { SidecarError } from '../errors.js';
import type { ForwardOutcome } from './outcome.js';

/** What the stages see of the request's one object (exchange.ts). */
export type ExchangeView = Pick<
  Exchange,
  'req' | 'res' | 'requestId' | 'method' | 'target' | 'clientGone' | 'trace' | 'keepAlive'
> &
  Partial<Pick<Exchange, 'caller' | 'callerCheck'>>;

/**
 * The upstream's answer head. `headers` is parsed when first read (most answers are never looked
 * at); fields a stage adds to it are written to the client.
 */
export interface UpstreamHead {
  readonly headers: IncomingHttpHeaders;
}

/** Sees every chunk of the upstream's answer body as it arrives. */
export interface BodyTap {
  chunk(data: Buffer): void;
  /** `complete`: the whole body arrived from the upstream; false when it was cut short. */
  end(complete: boolean): void;
  /**
   * True while the tap keeps a copy of the answer for others (a cache fill): the upstream is then
   * read at its own pace, whatever the client reads, and to its end when the client leaves. The
   * tap's own limit (`cache.maxEntryBytes`) bounds what that buffers.
   */
  owning?(): boolean;
}

/**
 * `upstreamAnswered`'s answer when the stage wrote the client's answer itself instead of the
 * upstream's (a stale entry instead of a 503): the upstream's body is read and dropped.
 */
export interface Served {
  /** The status the client got. */
  readonly served: number;
}

/** The forwarder's entry, for a stage that sends requests of its own (a background refresh). */
export type Forward = (exchange: Exchange) => Promise<ForwardOutcome>;

export interface ForwardStage {
  /** Called once by the forwarder that runs the stage. */
  attach?(forward: Forward): void;
  /**
   * Before the token is fetched and anything is sent upstream, in the order the stages are given.
   * Resolve `undefined` to go on; resolve an outcome after answering `exchange.res` yourself (a
   * cache hit: no token, nothing upstream); throw a SidecarError to refuse (429 `rate_limited`,
   * 503 `upstream_unavailable`): the one error handler answers it. May wait (a rate-limit slot);
   * the forwarder checks `clientGone()` after every stage.
   */
  beforeUpstream?(
    exchange: ExchangeView,
  ): ForwardOutcome | undefined | Promise<ForwardOutcome | undefined>;
  /**
   * The upstream's answer head, before it is written to the client (not called for a 401 that is
   * replayed). Return a tap to see the body (a cache capturing a 200), `Served` after answering
   * the client yourself, or undefined. Every stage sees every head, whatever an earlier one did.
   */
  upstreamAnswered?(
    exchange: ExchangeView,
    status: number,
    head: UpstreamHead,
  ): BodyTap | Served | undefined;
  /**
   * The request failed before anything was written to the client (a later stage refused, no
   * token, the upstream unreachable or too slow): answer `exchange.res` yourself and return the
   * outcome (a stale entry), or undefined to let the error be answered.
   */
  failed?(exchange: ExchangeView, error: SidecarError): ForwardOutcome | undefined;
}
