/**
 * Small parts of the store connection (fleet/connection.ts): the reconnect backoff, a repeating
 * timer on the injected clock, the undo of a late reply, an error's one-line cause and what kind
 * of answer it is.
 */
import type { Clock, TimerHandle } from '../clock.js';

/** A script answered TRYAGAIN (a slot migration) is sent again after this, within its budget. */
export const STORE_TRYAGAIN_DELAY_MS = 25;

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

/**
 * A server's refusal: an error reply that the next attempt will get too (a wrong password, an ACL
 * user without a command, a cluster that does not serve its slots, a data node asked as a
 * sentinel). At start it settles the verdict at once: waiting longer would not change it.
 */
export function isRefusal(error: unknown): boolean {
  return /^(WRONGPASS|NOAUTH|NOPERM|CLUSTERDOWN|ERR)\b/.test(describe(error));
}

/**
 * TRYAGAIN: a multi-key command during a slot migration whose keys are split between the two
 * nodes for a moment. Asked again shortly it succeeds; it is not an outage. (ASK and MOVED are
 * followed by node-redis itself.)
 */
export function isTryAgain(error: unknown): boolean {
  return describe(error).startsWith('TRYAGAIN');
}

/** `send`, asked again after each TRYAGAIN while the next try is before `deadline`: no outage. */
export async function sendRetryingTryAgain<T>(
  clock: Pick<Clock, 'now' | 'setTimeout'>,
  deadline: number,
  send: () => Promise<T>,
): Promise<T> {
  for (;;) {
    try {
      return await send();
    } catch (error) {
      if (!isTryAgain(error) || clock.now() + STORE_TRYAGAIN_DELAY_MS >= deadline) throw error;
    }
    await new Promise<void>((resolve) => {
      clock.setTimeout(resolve, STORE_TRYAGAIN_DELAY_MS).unref?.();
    });
  }
}

/** The cause as an operator reads it: a data node named where sentinels are expected says so. */
export function explainCause(mode: string, message: string): string {
  if (mode === 'sentinel' && /unknown command .?sentinel/i.test(message)) {
    return `${message} (STORE_URL names a data node, not a sentinel)`;
  }
  return message;
}
