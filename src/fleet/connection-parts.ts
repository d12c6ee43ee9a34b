/**
 * Small parts of the store connection (fleet/connection.ts): the reconnect backoff, a repeating
 * timer on the injected clock, the undo of a late reply, and an error's one-line cause.
 */
import type { Clock, TimerHandle } from '../clock.js';

/** Reconnect backoff: 100 ms doubling to 2 s, full jitter (a restarted store is found within ~2 s). */
export const RECONNECT_BASE_MS = 100;
export const RECONNECT_CAP_MS = 2_000;

/** Reconnect delay after `retries` failed attempts: full jitter over 100 ms doubling to 2 s. */
export function reconnectDelayMs(retries: number, random: number): number {
  const ceiling = Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** Math.min(retries, 16));
  return Math.max(RECONNECT_BASE_MS / 2, Math.round(random * ceiling));
}

/** The call was given up but the server ran it after all: the caller may undo what it can. */
export function callLate<T>(onLateReply: ((reply: T) => void) | undefined, reply: T): void {
  if (onLateReply === undefined) return;
  try {
    onLateReply(reply);
  } catch {
    // An undo that throws leaves what it would have undone to its TTL; never unhandled.
  }
}

/** A repeating timer on the injected clock, unref'd. */
export function setIntervalOn(clock: Clock, everyMs: number, fn: () => void): { stop(): void } {
  let handle: TimerHandle | undefined;
  let stopped = false;
  const arm = (): void => {
    handle = clock.setTimeout(() => {
      if (stopped) return;
      fn();
      arm();
    }, everyMs);
    handle.unref?.();
  };
  arm();
  return {
    stop() {
      stopped = true;
      if (handle !== undefined) clock.clearTimeout(handle);
    },
  };
}

export function describe(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return describe(error.errors[0]);
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}
