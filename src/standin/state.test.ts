import { describe, expect, it } from 'vitest';
import { manualClock } from '../../test/helpers/manual-clock.js';
import { createState, takeFault } from './state.js';

describe('createState', () => {
  it('defaults to the demo client, 201 answers and tokens of 1799 s on the given clock', async () => {
    const clock = manualClock();
    const state = await createState({ clock });
    expect(state).toMatchObject({
      clientId: 'demo-client',
      clientSecret: 'demo-secret',
      tokenStatus: 201,
      clock,
      issuerReaderToken: undefined,
      randomFault: undefined,
    });
    expect(state.tokens.issue(false).expiresIn).toBe(1799);
    expect(state.issuer.jwks.keys).toHaveLength(1);
  });

  it('takes the client, status, lifetime and signing key it is given', async () => {
    const first = await createState({});
    const state = await createState({
      clientId: 'c',
      clientSecret: 's',
      tokenStatus: 200,
      tokenLifetimeSeconds: 5,
      callerKeyPem: first.issuer.privateKeyPem,
    });
    expect([state.clientId, state.clientSecret, state.tokenStatus]).toEqual(['c', 's', 200]);
    expect(state.tokens.issue(false).expiresIn).toBe(5);
    expect(state.issuer.kid).toBe(first.issuer.kid);
  });
});

describe('takeFault', () => {
  it('serves queued faults in order, each as many times as asked, then none', async () => {
    const state = await createState({});
    state.faultQueue.push({ fault: { kind: 'reset' }, remaining: 2 });
    state.faultQueue.push({ fault: { kind: 'hang' }, remaining: 1 });
    const kinds = Array.from({ length: 4 }, () => takeFault(state)?.kind);
    expect(kinds).toEqual(['reset', 'reset', 'hang', undefined]);
    expect(state.faultQueue).toEqual([]);
  });

  it('a queued fault goes before the random one, which then applies at its ratio', async () => {
    const state = await createState({});
    state.randomFault = { fault: { kind: 'html' }, ratio: 1 };
    state.faultQueue.push({ fault: { kind: 'reset' }, remaining: 1 });
    expect(takeFault(state)?.kind).toBe('reset');
    expect(takeFault(state)?.kind).toBe('html');
    state.randomFault = { fault: { kind: 'html' }, ratio: Number.MIN_VALUE };
    const hits = Array.from({ length: 100 }, () => takeFault(state)).filter(Boolean);
    expect(hits).toEqual([]);
  });
});
