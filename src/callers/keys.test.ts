import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import pino from 'pino';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../clock.js';
import {
  ATTEMPT_DEADLINE_MS,
  CallerKeys,
  RETRY_MS,
  UNKNOWN_KID_INTERVAL_MS,
  UNKNOWN_KID_WAIT_MS,
  type JwksSource,
} from './keys.js';
import {
  CallerVerifier,
  CLOCK_TOLERANCE_SECONDS,
  REFUSAL_MEMORY_MS,
  type VerifierOptions,
} from './verifier.js';

const ISSUER = 'https://issuer.test';
const logger = pino({ level: 'silent' });

interface Signer {
  jwk: JWK;
  sign(sub: string, claims?: Record<string, unknown>): Promise<string>;
}

/** A key and tokens under it; `kid` undefined: neither the key nor its tokens name one. */
async function signer(kid: string | undefined, alg: 'RS256' | 'ES256' = 'ES256'): Promise<Signer> {
  const { publicKey, privateKey } = await generateKeyPair(alg);
  const named = kid === undefined ? {} : { kid };
  const jwk = { ...(await exportJWK(publicKey)), ...named, alg, use: 'sig' };
  return {
    jwk,
    sign: (sub, claims = {}) => {
      const now = Math.floor(Date.now() / 1000);
      const payload = { iss: ISSUER, aud: 'oauth-sidecar', sub, iat: now, exp: now + 3600 };
      return new SignJWT({ ...payload, ...claims })
        .setProtectedHeader({ alg, ...named })
        .sign(privateKey);
    },
  };
}

/**
 * A key set the test edits, counting fetches; `down` makes every fetch fail, `hung` makes every
 * fetch wait forever (a mount or peer that never answers).
 */
function fakeSource(keys: JWK[]) {
  const state = { keys, fetches: 0, down: false, hung: false };
  const source: JwksSource = {
    description: 'test',
    fetch() {
      state.fetches += 1;
      if (state.down) return Promise.reject(new Error('connection refused'));
      if (state.hung) return new Promise<never>(() => undefined);
      return Promise.resolve({ keys: [...state.keys] });
    },
  };
  return { state, source };
}

/** Keys from a fake source, and a verifier over them (its clock and limits as given). */
function setup(
  keys: JWK[],
  options: Partial<Pick<VerifierOptions, 'clock' | 'maxRemembered' | 'maxRefusals'>> = {},
) {
  const { state, source } = fakeSource(keys);
  const callerKeys = new CallerKeys({ source, clock: systemClock, logger });
  const verifier = new CallerVerifier({
    issuer: ISSUER,
    audience: 'oauth-sidecar',
    getKey: callerKeys.getKey,
    clock: systemClock,
    ...options,
  });
  return { state, callerKeys, verifier };
}

async function subjectOf(verifier: CallerVerifier, token: string): Promise<string> {
  const verdict = await verifier.check(token);
  return typeof verdict === 'string' ? verdict : verdict.subject;
}

let first: Signer;
let second: Signer;

beforeAll(async () => {
  first = await signer('k1');
  second = await signer('k2', 'RS256');
});

describe('CallerKeys', () => {
  // Only timers and Date: jose's crypto and the promise queue run for real.
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] }));
  afterEach(() => vi.useRealTimers());

  it('is not ready until the first key set arrives, and retries until it does', async () => {
    const { state, callerKeys, verifier } = setup([first.jwk]);
    state.down = true;
    await callerKeys.start();
    expect(callerKeys.ready).toBe(false);
    expect(await subjectOf(verifier, await first.sign('a'))).toBe('keys_unavailable');
    state.down = false;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(callerKeys.ready).toBe(true);
    expect(await subjectOf(verifier, await first.sign('a'))).toBe('a');
    callerKeys.stop();
  });

  it('accepts a key added to the set within 35 s, through the unknown kid', async () => {
    const { state, callerKeys, verifier } = setup([first.jwk]);
    await callerKeys.start();
    state.keys.push(second.jwk);
    const token = await second.sign('new');
    // Right after a fetch the unknown kid waits for its turn: refused, nothing fetched.
    expect(await subjectOf(verifier, token)).toBe('unknown_key');
    expect(state.fetches).toBe(1);
    await vi.advanceTimersByTimeAsync(UNKNOWN_KID_INTERVAL_MS);
    expect(await subjectOf(verifier, token)).toBe('new');
    expect(state.fetches).toBe(2);
    callerKeys.stop();
  });

  it('fetches at most 3 times for 60 tokens under unknown kids in 10 s', async () => {
    const { state, callerKeys, verifier } = setup([first.jwk]);
    await callerKeys.start();
    // Well past the interval: the first unknown kid may fetch at once.
    await vi.advanceTimersByTimeAsync(UNKNOWN_KID_INTERVAL_MS + 1);
    const strangers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => signer(`stranger-${i}`)),
    );
    const before = state.fetches;
    for (const stranger of strangers) {
      const verdicts = await Promise.all([verifier.check(await stranger.sign('x'))]);
      expect(verdicts[0]).toBe('unknown_key');
      await vi.advanceTimersByTimeAsync(10_000 / 60);
    }
    expect(state.fetches - before).toBeGreaterThanOrEqual(1);
    expect(state.fetches - before).toBeLessThanOrEqual(3);
    callerKeys.stop();
  });

  it('keeps serving the keys held while their source is down', async () => {
    const { state, callerKeys, verifier } = setup([first.jwk]);
    await callerKeys.start();
    state.down = true;
    // Refreshes fail for an hour (every one is retried, and logged).
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(state.fetches).toBeGreaterThan(2);
    expect(callerKeys.ready).toBe(true);
    expect(await subjectOf(verifier, await first.sign('still'))).toBe('still');
    expect(callerKeys.ageSeconds()).toBeGreaterThanOrEqual(3_600);
    callerKeys.stop();
  });

  it('ends a fetch that never answers at ATTEMPT_DEADLINE_MS, a request waiting for it sooner, and retries', async () => {
    const { state, callerKeys, verifier } = setup([first.jwk]);
    await callerKeys.start();
    state.hung = true;
    await vi.advanceTimersByTimeAsync(UNKNOWN_KID_INTERVAL_MS);
    // A token under a kid not held: its request waits for the fetch, which never answers.
    // It waits UNKNOWN_KID_WAIT_MS at most, then is refused: it holds no slot for the fetch's time.
    let verdict: string | undefined;
    void subjectOf(verifier, await (await signer('k-new')).sign('a')).then((v) => (verdict = v));
    await vi.advanceTimersByTimeAsync(UNKNOWN_KID_WAIT_MS - 1);
    expect(verdict).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(verdict).toBe('unknown_key');
    // The fetch itself is given up at ATTEMPT_DEADLINE_MS.
    expect(callerKeys.status().lastError).toBeUndefined();
    await vi.advanceTimersByTimeAsync(ATTEMPT_DEADLINE_MS - UNKNOWN_KID_WAIT_MS);
    expect(callerKeys.status().lastError).toBe(
      `fetching the caller keys did not finish within ${ATTEMPT_DEADLINE_MS} ms`,
    );
    // The keys held still serve, and the next attempt comes after the retry delay.
    expect(await subjectOf(verifier, await first.sign('held'))).toBe('held');
    const fetches = state.fetches;
    state.hung = false;
    await vi.advanceTimersByTimeAsync(RETRY_MS);
    expect(state.fetches).toBe(fetches + 1);
    expect(callerKeys.status().lastError).toBeUndefined();
    callerKeys.stop();
  });

  it('counts a malformed key set as a failed fetch: the keys age, so the stale-keys alert can fire', async () => {
    const { state, callerKeys } = setup([first.jwk]);
    await callerKeys.start();
    state.keys = [first.jwk, null as unknown as JWK];
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(state.fetches).toBeGreaterThan(2);
    expect(callerKeys.status().lastError).toMatch(/malformed/i);
    expect(callerKeys.status().kids).toEqual(['k1']);
    expect(callerKeys.ageSeconds()).toBeGreaterThanOrEqual(3_600);
    callerKeys.stop();
  });

  it('refreshes in the background and forgets remembered tokens when a key goes', async () => {
    const { state, callerKeys } = setup([first.jwk, second.jwk]);
    const changed = vi.fn();
    const keys = new CallerKeys({
      source: {
        description: 'test',
        fetch: () => Promise.resolve({ keys: [...state.keys] }),
      },
      clock: systemClock,
      logger,
      refreshMs: 60_000,
      onChange: changed,
    });
    await keys.start();
    state.keys.splice(1, 1);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(changed).toHaveBeenCalledTimes(1);
    expect(keys.status().kids).toEqual(['k1']);
    keys.stop();
    callerKeys.stop();
  });
});

describe('CallerVerifier', () => {
  it('remembers a verified token until its exp, by its hash', async () => {
    const { callerKeys, verifier } = setup([first.jwk]);
    await callerKeys.start();
    const token = await first.sign('app');
    const verdict = verifier.check(token);
    expect(verdict).toBeInstanceOf(Promise);
    expect(await verdict).toMatchObject({ subject: 'app' });
    // The second time: synchronous, no signature check.
    expect(verifier.check(token)).toMatchObject({ subject: 'app' });
    callerKeys.stop();
  });

  it('remembers a token as long as jose accepts it: through the leeway after its exp', async () => {
    let now = Date.now();
    const { callerKeys, verifier } = setup([first.jwk], { clock: { now: () => now } });
    await callerKeys.start();
    const exp = Math.floor(now / 1000) + 60;
    const token = await first.sign('app', { exp });
    // First seen already past its exp but inside the leeway: accepted, and remembered.
    const late = await first.sign('late', { exp: Math.floor(now / 1000) - 10 });
    expect(await verifier.check(late)).toMatchObject({ subject: 'late' });
    expect(verifier.check(late)).toMatchObject({ subject: 'late' });
    expect(await verifier.check(token)).toMatchObject({ subject: 'app' });
    // Past its exp, inside the leeway: still a lookup (synchronous), not a signature check.
    now = (exp + CLOCK_TOLERANCE_SECONDS) * 1000 - 1;
    expect(verifier.check(token)).toMatchObject({ subject: 'app' });
    // At the end of the leeway: verified again, and refused, as jose refuses it.
    now += 1;
    expect(await verifier.check(token)).toBe('expired');
    callerKeys.stop();
  });

  it('refuses a token it refused for its bytes again from memory, for 60 s or until the keys change', async () => {
    let now = Date.now();
    const { callerKeys, verifier } = setup([first.jwk], { clock: { now: () => now } });
    await callerKeys.start();
    const impostor = await signer('k1');
    const refused: [string, string][] = [
      ['expired', await first.sign('a', { exp: Math.floor(now / 1000) - 120 })],
      ['signature', await impostor.sign('a')],
      ['claims', await first.sign('a', { aud: 'another' })],
      ['malformed', 'not.a.jwt'],
    ];
    for (const [check, token] of refused) {
      expect(await verifier.check(token)).toBe(check);
      // The same token again (a client stuck with it, retrying): refused at once, no jose.
      expect(verifier.check(token)).toBe(check);
    }
    now += REFUSAL_MEMORY_MS - 1;
    expect(verifier.check(refused[0]![1])).toBe('expired');
    now += 1;
    for (const [check, token] of refused) {
      const again = verifier.check(token);
      expect(again).toBeInstanceOf(Promise);
      expect(await again).toBe(check);
    }
    verifier.forget();
    expect(verifier.check(refused[1]![1])).toBeInstanceOf(Promise);
    callerKeys.stop();
  });

  it('keeps no refusal that time or a fetch may undo: not yet valid, unknown key, keys unavailable', async () => {
    const { state, callerKeys, verifier } = setup([first.jwk]);
    await callerKeys.start();
    const early = await first.sign('a', { nbf: Math.floor(Date.now() / 1000) + 300 });
    const unknown = await (await signer('k-unknown')).sign('a');
    expect(await verifier.check(early)).toBe('not_yet_valid');
    expect(verifier.check(early)).toBeInstanceOf(Promise);
    expect(await verifier.check(unknown)).toBe('unknown_key');
    expect(verifier.check(unknown)).toBeInstanceOf(Promise);
    const down = setup([first.jwk]);
    down.state.down = true;
    const token = await first.sign('a');
    expect(await down.verifier.check(token)).toBe('keys_unavailable');
    expect(down.verifier.check(token)).toBeInstanceOf(Promise);
    expect(state.fetches).toBeGreaterThan(0);
    callerKeys.stop();
    down.callerKeys.stop();
  });

  it('holds at most maxRefusals refusals, and a flood of them pushes out no verified token', async () => {
    const { callerKeys, verifier } = setup([first.jwk], { maxRemembered: 2, maxRefusals: 3 });
    await callerKeys.start();
    const good = await first.sign('app');
    expect(await verifier.check(good)).toMatchObject({ subject: 'app' });
    const garbage = Array.from({ length: 10 }, (_, i) => `not.a.jwt${i}`);
    for (const token of garbage) expect(await verifier.check(token)).toBe('malformed');
    expect(verifier.check(good)).toMatchObject({ subject: 'app' });
    expect(garbage.map((token) => verifier.check(token) instanceof Promise)).toEqual([
      ...Array<boolean>(7).fill(true),
      false,
      false,
      false,
    ]);
    callerKeys.stop();
  });

  it('remembers no verdict reached while the key set changed under it', async () => {
    const { callerKeys, verifier } = setup([first.jwk]);
    await callerKeys.start();
    const token = await first.sign('app');
    const forged = await (await signer('k1')).sign('app');
    const pending = [verifier.check(token), verifier.check(forged)];
    expect(pending.map((verdict) => verdict instanceof Promise)).toEqual([true, true]);
    // The keys change while both are being checked (jose awaits the signature check).
    verifier.forget();
    const verdicts = await Promise.all(pending.map((verdict) => Promise.resolve(verdict)));
    expect(verdicts).toMatchObject([{ subject: 'app' }, 'signature']);
    // Neither verdict is kept: both are checked again, under the keys now held.
    expect(verifier.check(token)).toBeInstanceOf(Promise);
    expect(verifier.check(forged)).toBeInstanceOf(Promise);
    callerKeys.stop();
  });

  it('tries each key a token without a kid matches, as jose documents', async () => {
    const [one, two, stranger] = await Promise.all([
      signer(undefined),
      signer(undefined),
      signer(undefined),
    ]);
    const { callerKeys, verifier } = setup([one.jwk, two.jwk]);
    await callerKeys.start();
    expect(await verifier.check(await two.sign('app'))).toMatchObject({ subject: 'app' });
    expect(await verifier.check(await one.sign('app'))).toMatchObject({ subject: 'app' });
    expect(await verifier.check(await stranger.sign('app'))).toBe('signature');
    callerKeys.stop();
  });

  it('names the check that refused a token', async () => {
    const { callerKeys, verifier } = setup([first.jwk]);
    await callerKeys.start();
    const now = Math.floor(Date.now() / 1000);
    const cases: [string, Promise<string> | string][] = [
      ['expired', first.sign('a', { exp: now - 120 })],
      ['not_yet_valid', first.sign('a', { nbf: now + 300 })],
      ['not_yet_valid', first.sign('a', { iat: now + 300 })],
      ['claims', first.sign('a', { exp: undefined })],
      ['claims', first.sign('a', { aud: 'another' })],
      ['claims', first.sign('a', { iss: 'https://elsewhere.test' })],
      ['malformed', 'not.a.jwt'],
      ['malformed', 'x'.repeat(9000)],
    ];
    for (const [check, token] of cases) {
      expect(await subjectOf(verifier, await token)).toBe(check);
    }
    callerKeys.stop();
  });
});
