/**
 * Runs the configured stages (stages.ts) at the forwarder's two places: STAGE HOOK 1 before the
 * token and the upstream, STAGE HOOK 2 on the answer head; and a stage's rescue (a stale entry)
 * of a request that failed before anything was written. The forwarder makes none without stages.
 */
import { SidecarError } from '../errors.js';
import type { Exchange } from './exchange.js';
import { CLIENT_GONE, type ForwardOutcome } from './outcome.js';
import type { BodyTap, ForwardStage, Served, UpstreamHead } from './stages.js';

/** The taps of an answer no stage looks at. */
export const NO_TAPS: BodyTap[] = [];

export class StageRunner {
  readonly #before: readonly ForwardStage[];
  readonly #answered: readonly ForwardStage[];
  readonly #rescuers: readonly ForwardStage[];
  /** The rest of the path once every stage let the request go on (one function per forwarder). */
  readonly #next: (exchange: Exchange) => Promise<ForwardOutcome>;

  constructor(
    stages: readonly ForwardStage[],
    next: (exchange: Exchange) => Promise<ForwardOutcome>,
  ) {
    this.#before = stages.filter((s) => s.beforeUpstream !== undefined);
    this.#answered = stages.filter((s) => s.upstreamAnswered !== undefined);
    this.#rescuers = stages.filter((s) => s.failed !== undefined);
    this.#next = next;
  }

  /** The stages, then the rest of the path; a stage may answer instead of its error. */
  run(exchange: Exchange): Promise<ForwardOutcome> {
    if (this.#rescuers.length === 0) return this.#beforeUpstream(exchange);
    return this.#beforeUpstream(exchange).catch((err: unknown) => this.#rescue(exchange, err));
  }

  /** A stage may answer instead of the error (a stale entry), while nothing was written. */
  #rescue(exchange: Exchange, err: unknown): ForwardOutcome {
    if (err instanceof SidecarError && !exchange.res.headersSent && !exchange.clientGone()) {
      for (const stage of this.#rescuers) {
        const outcome = stage.failed?.(exchange, err);
        if (outcome !== undefined) return outcome;
      }
    }
    throw err;
  }

  #beforeUpstream(exchange: Exchange): Promise<ForwardOutcome> {
    try {
      // STAGE HOOK 1: each stage may wait, refuse (throw) or answer the client itself. A stage that
      // answers synchronously (no limit, no cache rule for the path) costs no await.
      const before = this.#before;
      for (let i = 0; i < before.length; i += 1) {
        const result = before[i]?.beforeUpstream?.(exchange);
        if (result instanceof Promise) return this.#afterStage(result, i, exchange);
        if (result !== undefined) return Promise.resolve(result);
        if (exchange.clientGone()) return Promise.resolve(CLIENT_GONE);
      }
      return this.#next(exchange);
    } catch (err) {
      // A stage that refuses throws: the caller sees a rejection, as from the rest of the path.
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** STAGE HOOK 1 from stage `index` on, once a stage had to be awaited. */
  async #afterStage(
    pending: Promise<ForwardOutcome | undefined>,
    index: number,
    exchange: Exchange,
  ): Promise<ForwardOutcome> {
    let served = await pending;
    for (let i = index + 1; ; i += 1) {
      if (served !== undefined) return served;
      if (exchange.clientGone()) return CLIENT_GONE;
      const stage = this.#before[i];
      if (stage === undefined) break;
      const result = stage.beforeUpstream?.(exchange);
      served = result instanceof Promise ? await result : result;
    }
    return this.#next(exchange);
  }

  /**
   * STAGE HOOK 2: the answer head, before the client sees it (a stage may add fields, or answer
   * the client itself: the upstream's body is then dropped and every tap ends incomplete).
   */
  taps(exchange: Exchange, status: number, head: UpstreamHead): BodyTap[] | Served {
    let taps: BodyTap[] | undefined;
    let served: Served | undefined;
    for (const stage of this.#answered) {
      const tap = stage.upstreamAnswered?.(exchange, status, head);
      if (tap === undefined) continue;
      if ('served' in tap) served = tap;
      else (taps ??= []).push(tap);
    }
    if (served === undefined) return taps ?? NO_TAPS;
    for (const tap of taps ?? NO_TAPS) tap.end(false);
    return served;
  }
}
