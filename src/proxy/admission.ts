/**
 * Admission (docs/design.md "Bounded work"): whether a proxied request goes on, and what it holds
 * while it does. The refusals (`proxy.maxHeaders`, two Hosts, path safety, refused methods, the
 * drain), the slots across the listener (`proxy.maxInFlight`, half of it for requests still
 * receiving their body) and per HTTP/1.1 connection (`proxy.maxPipelined`). The refusal is a
 * SidecarError; answers.ts turns it into the answer.
 */
import type { EventEmitter } from 'node:events';
import { overloadedError, SidecarError } from '../errors.js';
import { checkRequestTarget } from './path-safety.js';
import { hasNoBody, holdWhileBodyArrives, type ClientRequest } from './request-body.js';

/** `proxy.maxInFlight`: one counter for HTTP/1.1 and h2 together; also what a drain waits on. */
export interface InFlightLimit {
  readonly count: number;
  readonly max: number;
  /** Take a slot; false when `max` are already taken (the caller answers 503 `overloaded`). */
  tryAcquire(): boolean;
  release(): void;
  /** Resolves once no request is in progress. */
  whenIdle(): Promise<void>;
}

export function createInFlightLimit(max: number): InFlightLimit {
  let count = 0;
  let idleWaiters: (() => void)[] = [];
  return {
    get count() {
      return count;
    },
    max,
    tryAcquire() {
      if (count >= max) return false;
      count += 1;
      return true;
    },
    release() {
      count -= 1;
      if (count === 0 && idleWaiters.length > 0) {
        const waiters = idleWaiters;
        idleWaiters = [];
        for (const resolve of waiters) resolve();
      }
    },
    whenIdle() {
      if (count === 0) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
  };
}

/** The socket side the gate needs: stop and restart reading. */
export interface PausableSocket extends EventEmitter {
  pause(): unknown;
  resume(): unknown;
}

/** A request as the gate sees it: the connection it came on. */
export interface GatedRequest {
  readonly socket: PausableSocket;
}

/** Its response: emits 'close' once when the request ended, and knows its request. */
export interface GatedResponse extends EventEmitter {
  readonly req: GatedRequest;
}

interface ConnectionState<Q extends GatedRequest, R extends GatedResponse> {
  /** Whether a request of this connection is being handled (at most one at a time). */
  running: boolean;
  /** Requests node already parsed behind it, as flat request, response pairs. */
  waiting: (Q | R)[];
  paused: boolean;
  /** Whether the gate listens to the socket ('resume' and 'close'): once it first queued a request. */
  watching: boolean;
}

/**
 * `proxy.maxPipelined`: at most `max` requests of one HTTP/1.1 connection in progress, handled one
 * after another. Answers go out in request order anyway, so a request behind one whose client is
 * not reading could only hold an upstream connection and an in-flight slot while its answer waits
 * in memory; handled in turn, a connection that stops reading holds one upstream request, not
 * `max` (docs/design.md "Bounded work"). At `max`, the socket stops being read, so further
 * pipelined requests stay in the kernel's buffer (and the client's) instead of becoming objects
 * here; node parses a whole read (up to 64 KiB) at once, so the requests of the read that crossed
 * the limit wait too, in a queue bounded by that read.
 */
export interface PipelineGate<Q extends GatedRequest, R extends GatedResponse> {
  /**
   * Call `start(req, res)` now, or once the requests before it on the same connection ended. A
   * request has ended when its response emitted 'close' (the gate listens from `start` on).
   */
  admit(this: void, req: Q, res: R): void;
  /** True while a request of this connection is in progress or waiting to start. */
  busy(this: void, socket: PausableSocket): boolean;
}

/** Requests of the connection handled or waiting to be. */
function inProgress(state: { running: boolean; waiting: unknown[] }): number {
  return (state.running ? 1 : 0) + state.waiting.length / 2;
}

/** The connection's state, made when it sends its first request. */
function stateOf<Q extends GatedRequest, R extends GatedResponse>(
  states: WeakMap<object, ConnectionState<Q, R>>,
  socket: PausableSocket,
): ConnectionState<Q, R> {
  let state = states.get(socket);
  if (state === undefined) {
    state = { running: false, waiting: [], paused: false, watching: false };
    states.set(socket, state);
  }
  return state;
}

/**
 * Queue a request behind the one running; the gate's socket listeners go on at the first, and at
 * `max` the connection's next requests stay unread until one of its requests ends.
 */
function queue<Q extends GatedRequest, R extends GatedResponse>(
  state: ConnectionState<Q, R>,
  [req, res]: [Q, R],
  max: number,
  listeners: { keepPaused: (this: PausableSocket) => void; closed: (this: PausableSocket) => void },
): void {
  const socket = req.socket;
  state.waiting.push(req, res);
  if (!state.watching) {
    state.watching = true;
    socket.on('resume', listeners.keepPaused);
    socket.once('close', listeners.closed);
  }
  if (inProgress(state) >= max && !state.paused) {
    state.paused = true;
    socket.pause();
  }
}

export function createPipelineGate<Q extends GatedRequest, R extends GatedResponse>(
  max: number,
  start: (req: Q, res: R) => void,
): PipelineGate<Q, R> {
  const states = new WeakMap<object, ConnectionState<Q, R>>();
  const listeners = {
    // node resumes a socket itself once its output drained; a gate at its limit pauses it again.
    keepPaused(this: PausableSocket): void {
      if (states.get(this)?.paused) this.pause();
    },
    // The connection closed: node emits 'close' only on the answer it was writing, so requests
    // still waiting would never start. Each starts now, finds its client gone and is logged so;
    // nothing is forwarded for a client that left.
    closed(this: PausableSocket): void {
      const state = states.get(this);
      if (state === undefined) return;
      const waiting = state.waiting;
      state.waiting = [];
      for (let i = 0; i < waiting.length; i += 2) run(state, waiting[i] as Q, waiting[i + 1] as R);
    },
  };

  // One listener for every response (no closure per request): the response knows its socket.
  function ended(this: R): void {
    const socket = this.req.socket;
    const state = states.get(socket);
    if (state === undefined) return;
    state.running = false;
    if (state.waiting.length > 0) {
      const req = state.waiting.shift() as Q;
      run(state, req, state.waiting.shift() as R);
    }
    if (state.paused && inProgress(state) < max) {
      state.paused = false;
      socket.resume();
    }
  }

  function run(state: ConnectionState<Q, R>, req: Q, res: R): void {
    state.running = true;
    // 'on', not 'once': a response emits 'close' once (no wrapper per request).
    res.on('close', ended);
    start(req, res);
  }

  return {
    busy(socket) {
      const state = states.get(socket);
      return state !== undefined && inProgress(state) > 0;
    },
    admit(req, res) {
      const state = stateOf(states, req.socket);
      if (inProgress(state) === 0) run(state, req, res);
      else queue(state, [req, res], max, listeners);
    },
  };
}

/**
 * `proxy.maxHeaders` counts every header field line, repeated names included; h2 pseudo-headers
 * (`:path`, ...) are not fields (RFC 9113 §8.3). Also reports how many `Host` fields came: two
 * are refused (RFC 9112 §3.2: a request with more than one Host is a 400).
 */
export function countHeaderFields(rawHeaders: readonly string[]): {
  fields: number;
  hosts: number;
} {
  let fields = 0;
  let hosts = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.charCodeAt(0) === 58 /* ':' */) continue;
    fields += 1;
    if (name.length === 4 && name.toLowerCase() === 'host') hosts += 1;
  }
  return { fields, hosts };
}

/** What admission reads: the configured limits and the listener's state. */
export interface AdmissionRules {
  /** Allowed path prefixes (`upstream.pathPrefixes`). */
  prefixes: readonly string[];
  /** `proxy.maxHeaders`: header field lines per request; more get 431. */
  maxHeaders: number;
  /** `proxy.maxInFlight`: a request that finds it full gets 503 `overloaded` at once. */
  inFlight: InFlightLimit;
  /**
   * Half of `proxy.maxInFlight`: the most requests still receiving their body; one more that
   * may carry a body gets 503 `overloaded`. Default: no such limit.
   */
  receivingBodies?: InFlightLimit;
  /** True once shutdown began: new requests get 503 `shutting_down`. */
  isDraining: () => boolean;
}

/** TRACE would echo the injected bearer back to the caller; CONNECT would make this a tunnel. */
const REFUSED_METHODS = new Set(['TRACE', 'CONNECT', 'TRACK']);

/** The SidecarError that refuses the request before anything is forwarded, if any. */
function refusal(
  req: ClientRequest,
  rawTarget: string,
  rules: AdmissionRules,
): SidecarError | undefined {
  const { fields, hosts } = countHeaderFields(req.rawHeaders);
  if (fields > rules.maxHeaders) {
    return new SidecarError(
      'request_headers_too_large',
      `more than ${rules.maxHeaders} header fields`,
    );
  }
  if (hosts > 1) return new SidecarError('bad_request', 'more than one Host header');
  // Judged on the raw target: a parsed URL is already normalised (docs/design.md "Proxy").
  const verdict = checkRequestTarget(rawTarget, rules.prefixes);
  if (!verdict.ok) return new SidecarError(verdict.code, verdict.reason);
  const method = req.method ?? '';
  if (REFUSED_METHODS.has(method.toUpperCase())) {
    return new SidecarError('method_not_allowed', `${method} is not forwarded`);
  }
  if (rules.isDraining()) {
    return new SidecarError(
      'shutting_down',
      'the sidecar is shutting down; retry on another instance',
    );
  }
  return undefined;
}

/**
 * The refusal; or the request now holds an in-flight slot (the caller releases it), and, when it
 * may carry a body, a body slot (the returned function gives it back early). No object per
 * request: this runs for every one.
 */
export function admitRequest(
  req: ClientRequest,
  rawTarget: string,
  rules: AdmissionRules,
): SidecarError | (() => void) | undefined {
  const refused = refusal(req, rawTarget, rules);
  if (refused !== undefined) return refused;
  const { inFlight, receivingBodies } = rules;
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
