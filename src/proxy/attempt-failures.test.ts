/**
 * How a failed or aborted try ends, read from the state the failure found its call in
 * (call-states.ts): the client's answer while nothing was written, an outcome once a head was.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { EgressProxyError, SidecarError } from '../errors.js';
import { createMetricsRegistry } from '../telemetry/exposition.js';
import { createMetrics } from '../telemetry/metrics.js';
import { AttemptFailures, bodiless, type FailedAttempt } from './attempt-failures.js';
import type { CallState } from './call-states.js';
import { ClientGoneError } from './request-body.js';
import { UpstreamMetrics } from './upstream-metrics.js';

function failures() {
  const sidecar = createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false });
  const metrics = new UpstreamMetrics(sidecar);
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const classifier = new AttemptFailures({
    metrics,
    logger: pino({ level: 'info' }, sink),
    clock: { now: () => 0 },
    timeoutMs: 5_000,
    clientBodyTimeoutMs: 30_000,
  });
  const errors = async () =>
    (await sidecar.upstreamRequests.get()).values.find((v) => v.labels.code === 'error')?.value ??
    0;
  return { classifier, lines, errors };
}

const request = { method: 'GET', requestId: 'req-1' };

function call(state: CallState, more: Partial<FailedAttempt> = {}): FailedAttempt {
  return {
    state,
    abortedBy: undefined,
    upstreamStatus: state === 'sent' || state === 'queued' ? 0 : 200,
    clientEnded: false,
    label: 'GET',
    span: undefined,
    ...more,
  };
}

describe('AttemptFailures.classify', () => {
  it('before the head: the upstream unreachable is a 502, counted as an error', async () => {
    const { classifier, errors } = failures();
    const verdict = classifier.classify(new Error('ECONNREFUSED'), call('sent'), request);
    expect(verdict).toMatchObject({ code: 'upstream_unreachable' });
    expect(await errors()).toBe(1);
  });

  it('before the head: our timeout and undici headers timeout are 504s naming upstream.timeoutMs', () => {
    const { classifier } = failures();
    const ours = classifier.classify(
      new Error('late'),
      call('queued', { abortedBy: 'timeout' }),
      request,
    );
    expect(ours).toMatchObject({
      code: 'upstream_timeout',
      message: expect.stringContaining('5000 ms'),
    });
    const theirs = Object.assign(new Error('Headers Timeout Error'), {
      code: 'UND_ERR_HEADERS_TIMEOUT',
    });
    expect(classifier.classify(theirs, call('sent'), request)).toMatchObject({
      code: 'upstream_timeout',
    });
  });

  it('before the head: a client that left is gone; a stalled request body is a 408', () => {
    const { classifier } = failures();
    expect(
      classifier.classify(new ClientGoneError(), call('sent', { abortedBy: 'client' }), request),
    ).toEqual({ kind: 'client_gone' });
    expect(
      classifier.classify(
        new Error('aborted'),
        call('sent', { abortedBy: 'client_body' }),
        request,
      ),
    ).toMatchObject({ code: 'request_timeout', message: expect.stringContaining('30000 ms') });
    const slow = new SidecarError('request_timeout', 'too slow');
    expect(classifier.classify(slow, call('sent', { abortedBy: 'client_body' }), request)).toBe(
      slow,
    );
  });

  it('the egress proxy refusing names the proxy in the 502', () => {
    const { classifier, lines } = failures();
    const refused = new EgressProxyError('http://proxy:3128', 'api:443', { status: 403 });
    const verdict = classifier.classify(
      new Error('connect failed', { cause: refused }),
      call('sent'),
      request,
    );
    expect(verdict).toMatchObject({
      code: 'upstream_unreachable',
      message: expect.stringContaining('http://proxy:3128'),
    });
    expect(lines.filter((l) => l.event === 'egress_proxy')).toHaveLength(1);
  });

  it('a 401 being replayed whose body broke off is answered: the replay does not need it', () => {
    const { classifier } = failures();
    expect(
      classifier.classify(
        new Error('socket hang up'),
        call('replaying', { upstreamStatus: 401 }),
        request,
      ),
    ).toEqual({ kind: 'answered', upstreamStatus: 401, replay: true });
  });

  it('after the head: the client leaving or too slow is a cut answer; the upstream failing is logged once', async () => {
    const { classifier, lines, errors } = failures();
    expect(
      classifier.classify(
        new ClientGoneError(),
        call('streaming', { abortedBy: 'client' }),
        request,
      ),
    ).toEqual({ kind: 'cut', upstreamStatus: 200, result: 'client_closed' });
    expect(
      classifier.classify(
        new Error('slow'),
        call('streaming', { abortedBy: 'client_slow' }),
        request,
      ),
    ).toEqual({ kind: 'cut', upstreamStatus: 200, result: 'client_too_slow' });
    expect(lines).toHaveLength(0);
    expect(classifier.classify(new Error('reset'), call('finishing'), request)).toEqual({
      kind: 'cut',
      upstreamStatus: 200,
      result: 'upstream_failed',
    });
    expect(lines).toMatchObject([{ requestId: 'req-1', level: 40 }]);
    // A head was seen: not an upstream error in the counts.
    expect(await errors()).toBe(0);
  });

  it('after a bodiless head the client has its whole answer: extra upstream bytes failing are no cut', () => {
    const { classifier } = failures();
    const state = call('bodiless', { upstreamStatus: 204, clientEnded: true });
    expect(classifier.classify(new Error('framing'), state, request)).toEqual({
      kind: 'answered',
      upstreamStatus: 204,
      replay: false,
    });
  });
});

describe('bodiless', () => {
  it('is 204, 304 and any answer to HEAD (RFC 9110 §6.4.1)', () => {
    expect([204, 304, 200].map((s) => bodiless(s, 'GET'))).toEqual([true, true, false]);
    expect(bodiless(200, 'HEAD')).toBe(true);
  });
});
