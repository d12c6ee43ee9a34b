/**
 * The stages at the forwarder's two places, with hand-made stages and exchanges: their order,
 * an answer or a refusal from one, a client that leaves between them, a stage's rescue of a
 * failed request, and the taps of an answer head.
 */
import { describe, expect, it } from 'vitest';
import { SidecarError } from '../errors.js';
import type { Exchange } from './exchange.js';
import { CLIENT_GONE, type ForwardOutcome } from './outcome.js';
import { NO_TAPS, StageRunner } from './stage-runner.js';
import type { BodyTap, ForwardStage } from './stages.js';

const UPSTREAM: ForwardOutcome = {
  status: 200,
  upstreamStatus: 200,
  replayed: false,
  result: 'complete',
};
const CACHED: ForwardOutcome = { ...UPSTREAM, upstreamStatus: undefined };

function exchange(gone = false): Exchange & { gone: boolean } {
  const e = { gone, res: { headersSent: false } } as unknown as Exchange & { gone: boolean };
  e.clientGone = () => e.gone;
  return e;
}

function runner(stages: ForwardStage[], seen: string[] = []) {
  return new StageRunner(stages, () => {
    seen.push('upstream');
    return Promise.resolve(UPSTREAM);
  });
}

describe('StageRunner.run (STAGE HOOK 1)', () => {
  it('runs the stages in order, awaited or not, then the rest of the path', async () => {
    const seen: string[] = [];
    const stages: ForwardStage[] = [
      { beforeUpstream: () => void seen.push('a') },
      { beforeUpstream: () => Promise.resolve(void seen.push('b')) },
      { beforeUpstream: () => void seen.push('c') },
    ];
    expect(await runner(stages, seen).run(exchange())).toBe(UPSTREAM);
    expect(seen).toEqual(['a', 'b', 'c', 'upstream']);
  });

  it('a stage that answers ends the path there (sync or after a wait)', async () => {
    const seen: string[] = [];
    const later: ForwardStage = { beforeUpstream: () => void seen.push('later') };
    expect(await runner([{ beforeUpstream: () => CACHED }, later], seen).run(exchange())).toBe(
      CACHED,
    );
    const waited: ForwardStage = { beforeUpstream: () => Promise.resolve(CACHED) };
    expect(await runner([waited, later], seen).run(exchange())).toBe(CACHED);
    expect(seen).toEqual([]);
  });

  it('a client that left between stages stops the path', async () => {
    const seen: string[] = [];
    const e = exchange();
    const leaves: ForwardStage = { beforeUpstream: () => void (e.gone = true) };
    const after: ForwardStage = { beforeUpstream: () => void seen.push('after') };
    expect(await runner([leaves, after], seen).run(e)).toBe(CLIENT_GONE);
    const e2 = exchange();
    const leavesLater: ForwardStage = {
      beforeUpstream: () => Promise.resolve(void (e2.gone = true)),
    };
    expect(await runner([leavesLater, after], seen).run(e2)).toBe(CLIENT_GONE);
    expect(seen).toEqual([]);
  });

  it('a refusal rejects, unless a stage answers instead (a stale entry) while nothing was written', async () => {
    const refused = new SidecarError('rate_limited', 'slow down');
    const refuses: ForwardStage = {
      beforeUpstream: () => {
        throw refused;
      },
    };
    await expect(runner([refuses]).run(exchange())).rejects.toBe(refused);
    const rescuer: ForwardStage = {
      failed: (_e, err) => (err.code === 'rate_limited' ? CACHED : undefined),
    };
    expect(await runner([rescuer, refuses]).run(exchange())).toBe(CACHED);
    // A client that left gets no rescue.
    await expect(runner([rescuer, refuses]).run(exchange(true))).rejects.toBe(refused);
  });
});

describe('StageRunner.taps (STAGE HOOK 2)', () => {
  const head = { headers: {} };
  it('collects every stage taps; none is NO_TAPS', () => {
    const tap: BodyTap = { chunk() {}, end() {} };
    expect(runner([{}]).taps(exchange(), 200, head)).toBe(NO_TAPS);
    const stages: ForwardStage[] = [
      { upstreamAnswered: () => tap },
      { upstreamAnswered: () => tap },
    ];
    expect(runner(stages).taps(exchange(), 200, head)).toEqual([tap, tap]);
  });

  it('a stage that served the client ends every tap incomplete', () => {
    const ends: boolean[] = [];
    const tap: BodyTap = { chunk() {}, end: (complete) => void ends.push(complete) };
    const stages: ForwardStage[] = [
      { upstreamAnswered: () => tap },
      { upstreamAnswered: () => ({ served: 200 }) },
    ];
    expect(runner(stages).taps(exchange(), 503, head)).toEqual({ served: 200 });
    expect(ends).toEqual([false]);
  });
});
