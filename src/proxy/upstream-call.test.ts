/**
 * The upstream call against real node responses, driven the way undici drives a dispatch handler
 * (onRequestStart, onResponseStart, onResponseData, onResponseEnd): how the exchange settles when the client stays or
 * leaves after the upstream's answer ended.
 */
import { once } from 'node:events';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import http2, { type Http2ServerResponse } from 'node:http2';
import { connect, type AddressInfo } from 'node:net';
import type { Dispatcher } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../clock.js';
import { SlowReaders } from './slow-readers.js';
import type { BodyTap } from './stages.js';
import type { Attempt } from './attempt-outcome.js';
import { UpstreamCall } from './upstream-call.js';
import type { UpstreamCallHooks } from './upstream-hooks.js';
import { waitFor } from '../../test/helpers/wait.js';

/** A controller as undici hands a dispatch handler; `resume` is the test's to watch. */
function dispatchController(resume: () => void = () => {}): Dispatcher.DispatchController {
  return {
    aborted: false,
    paused: false,
    reason: null,
    rawHeaders: [],
    abort() {},
    pause() {},
    resume,
  };
}

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** A call whose answer is `size` bytes, its tap's verdict recorded. */
function drive(res: ServerResponse | Http2ServerResponse, size: number) {
  const tapEnds: boolean[] = [];
  const tap: BodyTap = { chunk() {}, end: (complete) => void tapEnds.push(complete) };
  const hooks: UpstreamCallHooks<undefined> = {
    onHead: () => ({
      replay: false,
      headers: { 'content-type': 'application/octet-stream' },
      bodiless: false,
      taps: [tap],
    }),
    onError: (call) => ({
      kind: 'cut',
      upstreamStatus: call.upstreamStatus,
      result: call.abortedBy === 'client' ? 'client_closed' : 'upstream_failed',
    }),
  };
  const call = new UpstreamCall(res, hooks, true, undefined);
  const controller = dispatchController();
  call.onRequestStart(controller);
  call.onResponseStart(controller, 200, {});
  call.onResponseData(controller, Buffer.alloc(size));
  call.onResponseEnd();
  return { done: call.done, tapEnds };
}

describe('UpstreamCall settles when node has written the answer, not before', () => {
  it('HTTP/1.1: a client that reads it all gets "answered", the tap a complete body', async () => {
    let settled!: Promise<Attempt>;
    let tapEnds!: boolean[];
    const server = createServer((_req, res) => ({ done: settled, tapEnds } = drive(res, 300_000)));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    closers.push(() => server.close());
    const res = await new Promise<IncomingMessage>((resolve) =>
      request(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, resolve).end(),
    );
    let bytes = 0;
    for await (const chunk of res) bytes += (chunk as Buffer).length;
    expect(bytes).toBe(300_000);
    await expect(settled).resolves.toEqual({
      kind: 'answered',
      upstreamStatus: 200,
      replay: false,
    });
    expect(tapEnds).toEqual([true]);
  });

  it('h2: a client that resets its stream before reading the end is "client_closed"; the tap, which saw the whole answer arrive, is complete', async () => {
    let settled!: Promise<Attempt>;
    let tapEnds!: boolean[];
    let upstreamDone!: () => void;
    const upstreamEnded = new Promise<void>((resolve) => (upstreamDone = resolve));
    const server = http2.createServer((_req, res) => {
      ({ done: settled, tapEnds } = drive(res, 300_000));
      upstreamDone();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    closers.push(() => server.close());
    const session = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    closers.push(() => session.close());
    const stream = session.request({ ':path': '/' });
    stream.pause(); // the flow-control window (64 KiB) holds the rest of the 300 KB on the server
    await once(stream, 'response');
    await upstreamEnded;
    stream.close(http2.constants.NGHTTP2_CANCEL);
    await expect(settled).resolves.toEqual({
      kind: 'cut',
      upstreamStatus: 200,
      result: 'client_closed',
    });
    // The cache stores what the upstream sent in full (DESIGN "Bounded work": waiters never wait
    // on the first requester's reading).
    expect(tapEnds).toEqual([true]);
  });
});

describe('UpstreamCall with a slow-reader watch', () => {
  it('a second client not reading, over the cap of one, is cut: its connection closed, the rest of the answer read and dropped', async () => {
    const watch = new SlowReaders({
      maxStalled: 1,
      maxStalledUpstream: 1,
      minBytesPerSecond: 500,
      clock: systemClock,
    });
    const calls: { call: UpstreamCall; resumed: number }[] = [];
    const hooks: UpstreamCallHooks<undefined> = {
      onHead: () => ({ replay: false, headers: {}, bodiless: false, taps: [] }),
      onError: (call) => ({
        kind: 'cut',
        upstreamStatus: call.upstreamStatus,
        result: call.abortedBy === 'client_slow' ? 'client_too_slow' : 'upstream_failed',
      }),
      readers: watch,
    };
    const server = createServer((_req, res) => {
      const entry = { call: new UpstreamCall(res, hooks, true, undefined), resumed: 0 };
      calls.push(entry);
      const controller = dispatchController(() => void (entry.resumed += 1));
      entry.call.onRequestStart(controller);
      entry.call.onResponseStart(controller, 200, {});
      // More than loopback's buffers take: the write reports backpressure.
      entry.call.onResponseData(controller, Buffer.alloc(32 * 1024 * 1024));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    const sockets = [0, 1].map(() => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.pause();
      socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      return socket;
    });
    closers.push(() => {
      for (const socket of sockets) socket.destroy();
      server.close();
    });
    await waitFor(() => calls.length >= 2, 10_000, 'two calls');
    const [first, second] = calls as [(typeof calls)[0], (typeof calls)[0]];
    expect(await second.call.done).toEqual({
      kind: 'cut',
      upstreamStatus: 200,
      result: 'client_too_slow',
    });
    // Resumed to read the rest and drop it; its client's connection closed.
    expect(second.resumed).toBe(1);
    expect(second.call.res.destroyed).toBe(true);
    expect(watch.stalled).toBe(1);
    expect(first.call.res.destroyed).toBe(false);
    first.call.res.destroy();
    await first.call.done;
    expect(watch.stalled).toBe(0);
  });
});
