/**
 * Coalescing in one process: while a cacheable GET is on its way upstream (a fill), identical
 * requests wait for it instead of going upstream too (docs/response-cache.md "Coalescing").
 */
import { systemClock, type Clock } from '../../clock.js';
import type { ExchangeView } from '../stages.js';

/** An upstream GET in progress that identical requests wait for. */
export interface Flight {
  waiters: number;
  settled: boolean;
  /**
   * Its requester left before the answer's head: nothing went wrong upstream, so the waiters
   * coalesce again behind one of them instead of each going upstream.
   */
  abandoned: boolean;
  /** A capture took over: only its end settles the flight (after the answer is stored). */
  captured: boolean;
  /** When the fill last made progress: its capture began, or a chunk of its answer arrived. */
  progressAt: number;
  /** With the shared tier: the fleet's fill lease is this flight's, and the path's generation. */
  lease: { generation: string } | undefined;
  /** The answer went to the store (which gave the lease back with it). */
  shared: boolean;
  /** The fill failed and a stale entry answered instead (its waiters answer so too). */
  staleUse: { forwarded: boolean; status?: number } | undefined;
  done: Promise<void>;
  /** Wake the waiters (they look the key up again) and stop accepting new ones. */
  settle(abandoned?: boolean): void;
}

/** Wait for `flight`, unless the client leaves first: then the waiter is dropped at once. */
export function waitFor(flight: Flight, exchange: ExchangeView): Promise<'done' | 'gone'> {
  const { res } = exchange;
  if (exchange.clientGone()) return Promise.resolve('gone');
  flight.waiters += 1;
  return new Promise((resolve) => {
    let over = false;
    const finish = (how: 'done' | 'gone') => {
      if (over) return;
      over = true;
      res.off('close', onClose);
      flight.waiters -= 1;
      resolve(how);
    };
    const onClose = () => finish('gone');
    res.once('close', onClose);
    void flight.done.then(() => finish('done'));
  });
}

/** The fills in progress, by cache key. */
export class Flights {
  readonly #flights = new Map<string, Flight>();

  /**
   * @param maxWaitMs the longest a fill's answer may take (`upstream.timeoutMs` +
   *   `upstream.bodyTimeoutMs`): no waiter waits longer, however the fill goes.
   * @param onSettle the fill is over (the shared tier gives back a lease it did not use).
   */
  constructor(
    private readonly maxWaitMs: number,
    private readonly onSettle: (key: string, flight: Flight) => void,
    private readonly clock: Pick<Clock, 'setTimeout' | 'clearTimeout'> = systemClock,
  ) {}

  get(key: string): Flight | undefined {
    return this.#flights.get(key);
  }

  has(key: string): boolean {
    return this.#flights.has(key);
  }

  /** Requests waiting, all keys together. */
  waiting(): number {
    let waiting = 0;
    for (const flight of this.#flights.values()) waiting += flight.waiters;
    return waiting;
  }

  start(key: string): Flight {
    const flights = this.#flights;
    const onSettle = this.onSettle;
    let resolve!: () => void;
    const clock = this.clock;
    const deadline = clock.setTimeout(() => flight.settle(), this.maxWaitMs);
    deadline.unref?.();
    const flight: Flight = {
      waiters: 0,
      settled: false,
      abandoned: false,
      captured: false,
      progressAt: 0,
      lease: undefined,
      shared: false,
      staleUse: undefined,
      done: new Promise<void>((r) => (resolve = r)),
      settle(abandoned = false) {
        if (flight.settled) return;
        flight.settled = true;
        flight.abandoned = abandoned;
        clock.clearTimeout(deadline);
        if (flights.get(key) === flight) flights.delete(key);
        onSettle(key, flight);
        resolve();
      },
    };
    flights.set(key, flight);
    return flight;
  }

  /**
   * `exchange` leads the fill of `key`. However it ends before a capture starts (an error before
   * any header, the client leaving), waiters wake; a requester that left hands the fill over to
   * one of them. Once capturing, the capture's end settles it, after the store.
   */
  lead(exchange: ExchangeView, key: string): Flight {
    const lead = this.start(key);
    exchange.res.once('close', () => {
      if (!lead.captured) lead.settle(!exchange.res.headersSent && exchange.clientGone());
    });
    return lead;
  }
}
