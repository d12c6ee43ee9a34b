import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createIdleSweep, type SweptSocket } from './idle-connections.js';

class FakeSocket extends EventEmitter implements SweptSocket {
  bytesRead = 0;
  bytesWritten = 0;
  busy = false;
  destroyed = false;
  destroy(): void {
    this.destroyed = true;
    this.emit('close');
  }
}

describe('createIdleSweep', () => {
  let now = 0;
  const clock = {
    setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms),
    clearTimeout: (handle: unknown) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  };

  beforeEach(() => {
    vi.useFakeTimers();
    now = 0;
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** Advance the fake timers and the monotonic clock together, `step` ms at a time. */
  function advance(ms: number, step = 100): void {
    for (let left = ms; left > 0; left -= step) {
      now += Math.min(step, left);
      vi.advanceTimersByTime(Math.min(step, left));
    }
  }

  function sweepOf(closeAfterMs: number, intervalMs = 1_000) {
    return createIdleSweep<FakeSocket>({
      closeAfterMs,
      intervalMs,
      busy: (socket) => socket.busy,
      clock,
      now: () => now,
    });
  }

  it('closes a quiet connection after closeAfterMs, never before, at most one interval late', () => {
    const sweep = sweepOf(5_000);
    const socket = new FakeSocket();
    sweep.track(socket);
    advance(4_999);
    expect(socket.destroyed).toBe(false);
    advance(1_001);
    expect(socket.destroyed).toBe(true);
    expect(sweep.size).toBe(0);
  });

  it('counts the quiet time from the last sweep that saw bytes move', () => {
    const sweep = sweepOf(5_000);
    const socket = new FakeSocket();
    sweep.track(socket);
    advance(3_500);
    // A request and its answer, just before a sweep.
    socket.bytesRead += 80;
    socket.bytesWritten += 2_100;
    advance(500); // the sweep at 4 s sees them
    advance(4_999); // 8.999 s: 4.999 s since that sweep
    expect(socket.destroyed).toBe(false);
    advance(1_001);
    expect(socket.destroyed).toBe(true);
  });

  it('never closes a connection whose request is in progress, however quiet', () => {
    const sweep = sweepOf(2_000);
    const socket = new FakeSocket();
    sweep.track(socket);
    socket.busy = true;
    advance(60_000, 1_000);
    expect(socket.destroyed).toBe(false);
    // Answered: quiet from the next sweep on.
    socket.busy = false;
    advance(2_000, 1_000);
    expect(socket.destroyed).toBe(false);
    advance(1_000, 1_000);
    expect(socket.destroyed).toBe(true);
  });

  it('keeps a connection that is used more often than the timeout', () => {
    const sweep = sweepOf(2_000);
    const socket = new FakeSocket();
    sweep.track(socket);
    for (let i = 0; i < 30; i += 1) {
      advance(1_500);
      socket.bytesRead += 40;
    }
    expect(socket.destroyed).toBe(false);
  });

  it('forgets a connection that closed, and runs no timer while nothing is tracked', () => {
    const sweep = sweepOf(5_000);
    expect(vi.getTimerCount()).toBe(0);
    const a = new FakeSocket();
    const b = new FakeSocket();
    sweep.track(a);
    sweep.track(b);
    sweep.track(a);
    expect(sweep.size).toBe(2);
    expect(vi.getTimerCount()).toBe(1);
    a.emit('close');
    b.emit('close');
    expect(sweep.size).toBe(0);
    advance(1_000);
    expect(vi.getTimerCount()).toBe(0);
    // Tracking again re-arms it.
    sweep.track(new FakeSocket());
    expect(vi.getTimerCount()).toBe(1);
  });

  it('sweeps many connections with one timer', () => {
    const sweep = sweepOf(3_000);
    const sockets = Array.from({ length: 10_000 }, () => new FakeSocket());
    for (const socket of sockets) sweep.track(socket);
    expect(vi.getTimerCount()).toBe(1);
    // Half of them busy.
    sockets.forEach((socket, i) => (socket.busy = i % 2 === 0));
    advance(4_000, 1_000);
    expect(sockets.filter((s) => s.destroyed)).toHaveLength(5_000);
    expect(sockets.every((s, i) => s.destroyed === (i % 2 === 1))).toBe(true);
  });

  it('stop() clears the timer and tracks nothing more', () => {
    const sweep = sweepOf(1_000);
    const socket = new FakeSocket();
    sweep.track(socket);
    sweep.stop();
    expect(vi.getTimerCount()).toBe(0);
    advance(5_000);
    expect(socket.destroyed).toBe(false);
    sweep.track(new FakeSocket());
    expect(vi.getTimerCount()).toBe(0);
  });
});
