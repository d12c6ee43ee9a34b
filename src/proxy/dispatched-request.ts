/**
 * One request as undici holds it, the base of an upstream call (upstream-call.ts): undici's
 * controller once it hands it over (pause, resume, abort), an abort that came before that, and
 * when undici lets go of the request — which may be after the exchange settled (a 504 still
 * queued for a connection).
 */
import type { Dispatcher } from 'undici';

export abstract class DispatchedRequest {
  /** undici's controller for this request (undefined while it waits for a connection). */
  protected controller: Dispatcher.DispatchController | undefined;
  /** Set when the exchange was aborted before undici handed over its controller. */
  #pendingAbort: Error | undefined;
  #isReleased = false;
  /** Made only when asked for (a request undici still holds after the exchange settled). */
  #released: Promise<void> | undefined;
  #release: (() => void) | undefined;

  get isReleased(): boolean {
    return this.#isReleased;
  }

  /** Resolves once undici is finished with the request (answered, failed or dropped). */
  get released(): Promise<void> {
    if (this.#isReleased) return Promise.resolve();
    this.#released ??= new Promise<void>((resolve) => {
      this.#release = resolve;
    });
    return this.#released;
  }

  protected markReleased(): void {
    this.#isReleased = true;
    this.#release?.();
  }

  /**
   * Still queued for a connection: undici drops the request the moment it would start
   * (`released` tells when, and the caller keeps the request counted until then).
   */
  protected dropOnStart(reason: Error): void {
    this.#pendingAbort = reason;
  }

  // undici's public dispatch handler API: the controller pauses, resumes and aborts.

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.#pendingAbort !== undefined) {
      // Thrown, not `abort()`: undici then drops the request before writing it and keeps the
      // connection (an abort destroys it, and the pool opens another: under an h2 reset storm
      // that was connection churn past `upstream.maxConnections` at the kernel).
      throw this.#pendingAbort;
    }
  }
}
