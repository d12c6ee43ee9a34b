/**
 * Every transition of the request path's states (call-states.ts), each on its own: an upstream
 * call driven the way undici drives a dispatch handler, with a hand-made controller (whose abort
 * reports the error back at once, as undici's does) and a hand-made client response. No clock.
 * Also: docs/design.md lists the same states and transitions as the code.
 */
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import type { Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { SidecarError } from '../errors.js';
import type { Attempt } from './attempt-outcome.js';
import {
  checkTransition,
  IllegalTransitionError,
  NEXT,
  STATE,
  STATE_NAMES,
  type CallState,
} from './call-states.js';
import type { ClientResponse } from './outcome.js';
import { ClientGoneError } from './request-body.js';
import type { BodyTap } from './stages.js';
import { UpstreamCall } from './upstream-call.js';
import type { HeadDecision, UpstreamCallHooks } from './upstream-hooks.js';

/** A client response as the call uses it: what was written, and whether it accepts more. */
class FakeResponse extends EventEmitter {
  writableEnded = false;
  writableFinished = false;
  writableLength = 0;
  destroyed = false;
  status: number | undefined;
  written = 0;
  accepts = true;
  writeHead(status: number): this {
    this.status = status;
    return this;
  }
  write(chunk: Buffer): boolean {
    this.written += chunk.length;
    return this.accepts;
  }
  end(): this {
    this.writableEnded = true;
    return this;
  }
  /** node handed the last bytes over. */
  finish(): void {
    this.writableFinished = true;
    this.emit('finish');
  }
  /** The call cut the client: node emits 'close' on a later tick. */
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    process.nextTick(() => this.emit('close'));
    return this;
  }
  /** The client left: its 'close' arrives. */
  leave(): void {
    this.destroyed = true;
    this.emit('close');
  }
}

interface Harness {
  call: UpstreamCall;
  res: FakeResponse;
  controller: Dispatcher.DispatchController & { aborts: Error[]; pauses: number; resumes: number };
  drainings: number;
  settled: () => Promise<Attempt | Error>;
}

const ANSWER: HeadDecision = { replay: false, headers: {}, bodiless: false, taps: [] };

/** A call in its first state, `queued`, with the caller's decision on the head. */
function harness(decision: HeadDecision = ANSWER, drainable = true): Harness {
  const res = new FakeResponse();
  const h = { drainings: 0 } as Harness;
  const hooks: UpstreamCallHooks<undefined> = {
    onHead: () => decision,
    onError: (call, err) => {
      if (call.state === 'streaming' || call.state === 'finishing') {
        return {
          kind: 'cut',
          upstreamStatus: call.upstreamStatus,
          result: call.abortedBy === 'client' ? 'client_closed' : 'upstream_failed',
        };
      }
      if (call.state === 'replaying' || call.state === 'bodiless') {
        const replay = call.state === 'replaying';
        return { kind: 'answered', upstreamStatus: call.upstreamStatus, replay };
      }
      return call.abortedBy === 'client' ? { kind: 'client_gone' } : err;
    },
    onDraining: () => void (h.drainings += 1),
  };
  const call = new UpstreamCall(res as unknown as ClientResponse, hooks, drainable, undefined);
  const controller = {
    aborted: false,
    paused: false,
    reason: null,
    rawHeaders: [],
    aborts: [] as Error[],
    pauses: 0,
    resumes: 0,
    abort(reason: Error) {
      this.aborts.push(reason);
      // undici reports the abort back to the handler before `abort()` returns.
      call.onResponseError(this, reason);
    },
    pause() {
      this.pauses += 1;
    },
    resume() {
      this.resumes += 1;
    },
  };
  Object.assign(h, { call, res, controller });
  // Caught at once: a call that settles with an error in a test that does not ask is no failure.
  const settled = call.done.catch((err: unknown) => err as Error);
  h.settled = () => settled;
  return h;
}

/** The call driven to `state` (the shortest way there). */
function at(state: CallState, decision?: HeadDecision, drainable?: boolean): Harness {
  const h = harness(decision, drainable);
  const { call, controller } = h;
  if (state === 'queued') return h;
  if (state === 'dropping') {
    call.abort('timeout', new SidecarError('upstream_timeout', 'late'));
    return h;
  }
  call.onRequestStart(controller);
  if (state === 'sent') return h;
  call.onResponseStart(controller, 200, {});
  if (state === 'finishing') call.onResponseEnd();
  if (state === 'orphaned' || state === 'draining') h.res.leave();
  return h;
}

const bodiless: HeadDecision = { replay: false, headers: {}, bodiless: true, taps: [] };
const replay: HeadDecision = { replay: true, bodiless: true, taps: [] };
const served: HeadDecision = { replay: false, bodiless: true, taps: [], served: 200 };
const tapEnds: boolean[] = [];
const owningTap: BodyTap = {
  chunk() {},
  end: (complete) => void tapEnds.push(complete),
  owning: () => true,
};
const owned: HeadDecision = { replay: false, headers: {}, bodiless: false, taps: [owningTap] };
const chunk = Buffer.alloc(16);

/** One test per transition, named `from → to`. */
const transitions: Record<string, () => Promise<void> | void> = {
  'queued → sent': () => {
    const h = at('queued');
    h.call.onRequestStart(h.controller);
    expect(h.call.state).toBe('sent');
    expect(h.call.isReleased).toBe(false);
  },
  'queued → dropping': async () => {
    const h = at('queued');
    h.call.abort('timeout', new SidecarError('upstream_timeout', 'late'));
    expect(h.call.state).toBe('dropping');
    // Answered at once; undici still holds the request.
    expect(await h.settled()).toMatchObject({ code: 'upstream_timeout' });
    expect(h.call.isReleased).toBe(false);
  },
  'queued → done': async () => {
    const h = at('queued');
    h.call.dispatchFailed(new Error('invalid origin'));
    expect(h.call.state).toBe('done');
    expect(await h.settled()).toMatchObject({ message: 'invalid origin' });
    expect(h.call.isReleased).toBe(true);
  },
  'dropping → done': async () => {
    const h = at('dropping');
    const released = h.call.released;
    // Thrown, for undici to drop the request unsent and keep the connection; it then reports it.
    expect(() => h.call.onRequestStart(h.controller)).toThrow('late');
    expect(h.controller.aborts).toEqual([]);
    h.call.onResponseError(h.controller, new Error('late'));
    expect(h.call.state).toBe('done');
    await released;
  },
  'sent → streaming': () => {
    const h = at('sent');
    h.call.onResponseStart(h.controller, 200, {});
    expect(h.call.state).toBe('streaming');
    expect(h.res.status).toBe(200);
    h.call.onResponseData(h.controller, chunk);
    expect(h.res.written).toBe(16);
  },
  'sent → bodiless': () => {
    const h = at('sent', bodiless);
    h.call.onResponseStart(h.controller, 204, {});
    expect(h.call.state).toBe('bodiless');
    expect(h.res.writableEnded).toBe(true);
    h.call.onResponseData(h.controller, chunk);
    expect(h.res.written).toBe(0);
  },
  'sent → replaying': () => {
    const h = at('sent', replay);
    h.call.onResponseStart(h.controller, 401, {});
    expect(h.call.state).toBe('replaying');
    expect(h.res.status).toBeUndefined();
  },
  'sent → served': () => {
    const h = at('sent', served);
    h.call.onResponseStart(h.controller, 503, {});
    expect(h.call.state).toBe('served');
    expect(h.res.status).toBeUndefined();
  },
  'sent → draining': async () => {
    const h = at('sent');
    h.res.leave();
    expect(h.call.state).toBe('draining');
    expect(await h.settled()).toEqual({ kind: 'client_gone' });
    expect(h.drainings).toBe(1);
    // The answer that comes is read and dropped.
    h.call.onResponseStart(h.controller, 200, {});
    h.call.onResponseData(h.controller, chunk);
    expect(h.res.status).toBeUndefined();
  },
  'sent → done': async () => {
    const h = at('sent');
    h.call.abort('timeout', new SidecarError('upstream_timeout', 'late'));
    expect(h.controller.aborts).toHaveLength(1);
    expect(h.call.state).toBe('done');
    expect(await h.settled()).toMatchObject({ code: 'upstream_timeout' });
  },
  'streaming → finishing': () => {
    const h = at('streaming');
    h.call.onResponseEnd();
    expect(h.call.state).toBe('finishing');
    expect(h.res.writableEnded).toBe(true);
    expect(h.call.isReleased).toBe(true);
  },
  'streaming → draining': async () => {
    const h = at('streaming');
    h.res.accepts = false;
    h.call.onResponseData(h.controller, chunk);
    expect(h.controller.pauses).toBe(1);
    h.res.leave();
    expect(h.call.state).toBe('draining');
    expect(await h.settled()).toEqual({
      kind: 'cut',
      upstreamStatus: 200,
      result: 'client_closed',
    });
    // Resumed to read the rest and drop it, up to the limit: then the connection is given up.
    expect(h.controller.resumes).toBe(1);
    h.call.onResponseData(h.controller, Buffer.alloc(64 * 1024 + 1));
    expect(h.controller.aborts).toHaveLength(1);
    expect(h.call.state).toBe('done');
  },
  'streaming → orphaned': async () => {
    tapEnds.length = 0;
    const h = at('streaming', owned);
    h.res.leave();
    expect(h.call.state).toBe('orphaned');
    expect(await h.settled()).toMatchObject({ kind: 'cut', result: 'client_closed' });
    expect(tapEnds).toEqual([]); // the tap reads on
  },
  'streaming → done': async () => {
    const h = at('streaming');
    h.call.onResponseError(h.controller, new Error('socket hang up'));
    expect(h.call.state).toBe('done');
    expect(await h.settled()).toMatchObject({ kind: 'cut', result: 'upstream_failed' });
  },
  'bodiless → draining': async () => {
    const h = at('bodiless', bodiless);
    h.res.leave();
    expect(h.call.state).toBe('draining');
    expect(await h.settled()).toEqual({ kind: 'answered', upstreamStatus: 200, replay: false });
  },
  'bodiless → done': async () => {
    const h = at('bodiless', bodiless);
    h.call.onResponseEnd();
    expect(h.call.state).toBe('done');
    expect(await h.settled()).toMatchObject({ kind: 'answered', replay: false });
  },
  'replaying → draining': async () => {
    const h = at('replaying', replay);
    h.res.leave();
    expect(h.call.state).toBe('draining');
    expect(await h.settled()).toMatchObject({ kind: 'answered', replay: true });
  },
  'replaying → done': async () => {
    const h = at('replaying', replay);
    h.call.onResponseEnd();
    expect(h.call.state).toBe('done');
    expect(await h.settled()).toMatchObject({ kind: 'answered', replay: true });
  },
  'served → draining': async () => {
    const h = at('served', served);
    h.res.leave();
    expect(h.call.state).toBe('draining');
    expect(await h.settled()).toMatchObject({ kind: 'answered', status: 200 });
  },
  'served → done': async () => {
    const h = at('served', served);
    h.call.onResponseEnd();
    expect(h.call.state).toBe('done');
    expect(await h.settled()).toMatchObject({ kind: 'answered', upstreamStatus: 200, status: 200 });
  },
  'finishing → done': async () => {
    const h = at('finishing');
    h.res.finish();
    expect(h.call.state).toBe('done');
    expect(await h.settled()).toMatchObject({ kind: 'answered', upstreamStatus: 200 });
  },
  'draining → done': async () => {
    const h = at('draining');
    const released = h.call.released;
    h.call.onResponseEnd();
    expect(h.call.state).toBe('done');
    await released;
  },
  'orphaned → done': () => {
    tapEnds.length = 0;
    const h = at('orphaned', owned);
    h.call.onResponseData(h.controller, chunk);
    h.call.onResponseEnd();
    expect(h.call.state).toBe('done');
    expect(tapEnds).toEqual([true]); // the cache got the whole answer
  },
};

describe('the request path: each transition', () => {
  it.each(Object.keys(transitions))('%s', async (name) => {
    await transitions[name]?.();
  });

  it('has a test for every transition the table lists, and none it does not', () => {
    const listed = Object.entries(NEXT).flatMap(([from, tos]) =>
      tos.map((to) => `${from} → ${to}`),
    );
    expect(Object.keys(transitions).sort()).toEqual(listed.sort());
  });

  it('allows exactly the transitions the table lists, by code', () => {
    for (const from of STATE_NAMES) {
      for (const to of STATE_NAMES) {
        const check = () => checkTransition(STATE[from], STATE[to]);
        if (NEXT[from].includes(to)) expect(check).not.toThrow();
        else expect(check, `${from} → ${to}`).toThrow(IllegalTransitionError);
      }
    }
  });

  it('refuses a transition the table does not list', () => {
    expect(() => checkTransition(STATE.done, STATE.sent)).toThrow(IllegalTransitionError);
    expect(() => checkTransition(STATE.queued, STATE.streaming)).toThrow(
      'an upstream call cannot go from queued to streaming',
    );
    // A call that settled ignores what comes after: a head, more data, another abort.
    const h = at('sent');
    h.call.abort('timeout', new ClientGoneError());
    h.call.onResponseStart(h.controller, 200, {});
    h.call.abort('client', new ClientGoneError());
    expect(h.call.state).toBe('done');
  });
});

describe('docs/design.md "The request path\'s states"', () => {
  it('lists the states and transitions of call-states.ts', () => {
    const design = readFileSync(new URL('../../docs/design.md', import.meta.url), 'utf8');
    const section = /### The request path's states\n([\s\S]*?)(?=\n#{2,3} )/.exec(design)?.[1];
    expect(section, 'the section').toBeDefined();
    const documented: Record<string, string[]> = {};
    for (const line of section?.split('\n') ?? []) {
      const match = /^- `([a-z]+)`\s*→\s*(.*?)(?::|$)/.exec(line);
      if (match === null) continue;
      const tos = [...(match[2] ?? '').matchAll(/`([a-z]+)`/g)].map((m) => m[1] ?? '');
      documented[match[1] ?? ''] = tos;
    }
    const code = Object.fromEntries(Object.entries(NEXT).map(([from, tos]) => [from, [...tos]]));
    expect(documented).toEqual(code);
  });
});
