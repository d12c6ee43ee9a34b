import { describe, expect, it, vi } from 'vitest';
import type { CallerRule } from '../config/types.js';
import { SidecarError } from '../errors.js';
import type { ExchangeView } from '../proxy/stages.js';
import { CallerRules } from './rules.js';
import { callerStage, type CallerAuthResult } from './stage.js';
import type { CallerCheck, VerifiedCaller } from './verifier.js';

const RULES: CallerRule[] = [
  {
    subject: 'svc:reports',
    match: 'exact',
    caller: 'reports',
    methods: undefined,
    paths: undefined,
  },
  {
    subject: 'svc:readers:',
    match: 'prefix',
    caller: 'readers',
    methods: ['GET'],
    paths: ['/v1.0/'],
  },
];

type Answer = VerifiedCaller | CallerCheck | Promise<VerifiedCaller | CallerCheck>;

/** The stage over a verifier answering by token, counting each result. */
function setup(answers: Record<string, Answer>) {
  const counted: CallerAuthResult[] = [];
  const seen: string[] = [];
  const rules = new CallerRules(RULES);
  const stage = callerStage({
    verifier: {
      check: (token: string) => {
        seen.push(token);
        return answers[token] ?? 'signature';
      },
    },
    rules,
    counts: { count: (result) => counted.push(result) },
  });
  return { stage, counted, seen, rules };
}

function exchange(
  authorization: string | undefined,
  method = 'GET',
  target = '/v1.0/x',
  fields: Record<string, string> = {},
) {
  return {
    req: { headers: authorization === undefined ? fields : { authorization, ...fields } },
    method,
    target,
  } as unknown as ExchangeView;
}

const caller = (subject: string): VerifiedCaller => ({ subject, expiresAt: Date.now() + 60_000 });

/** The stage's verdict: undefined when it lets the request go on, else the error's code. */
async function run(stage: ReturnType<typeof callerStage>, ex: ExchangeView) {
  try {
    return await stage.beforeUpstream!(ex);
  } catch (error) {
    if (error instanceof SidecarError) return error.code;
    throw error;
  }
}

describe('callerStage', () => {
  it('refuses a request without a token as missing, one with a non-bearer header as malformed', async () => {
    const { stage, counted, seen } = setup({});
    const none = exchange(undefined);
    expect(await run(stage, none)).toBe('caller_unauthenticated');
    expect(none.callerCheck).toBe('missing');
    for (const header of ['Basic abc', 'Bearer ', 'Bearer a b', 'Bearer']) {
      const bad = exchange(header);
      expect(await run(stage, bad)).toBe('caller_unauthenticated');
      expect(bad.callerCheck).toBe('malformed');
    }
    expect(counted).toEqual(['missing', 'malformed', 'malformed', 'malformed', 'malformed']);
    expect(seen).toEqual([]);
  });

  it('accepts the scheme in any case and hands the verifier the token alone', async () => {
    const { stage, seen } = setup({ tok: caller('svc:reports') });
    expect(await run(stage, exchange('bEaReR tok'))).toBeUndefined();
    expect(seen).toEqual(['tok']);
  });

  it('refuses a token the verifier rejects with its check', async () => {
    const { stage, counted } = setup({ old: 'expired' });
    const ex = exchange('Bearer old');
    expect(await run(stage, ex)).toBe('caller_unauthenticated');
    expect(ex.callerCheck).toBe('expired');
    expect(counted).toEqual(['expired']);
  });

  it('names the caller from its rule; counts a fresh verification and a remembered one', async () => {
    const { stage, counted } = setup({
      fresh: Promise.resolve(caller('svc:reports')),
      known: caller('svc:reports'),
    });
    const first = exchange('Bearer fresh', 'POST', '/beta/y');
    expect(await run(stage, first)).toBeUndefined();
    expect(first.caller).toBe('reports');
    const second = exchange('Bearer known');
    expect(await run(stage, second)).toBeUndefined();
    expect(second.caller).toBe('reports');
    expect(counted).toEqual(['verified', 'remembered']);
  });

  it('forbids a verified caller no rule admits, or one its rule does not allow', async () => {
    const { stage, counted } = setup({
      stranger: caller('svc:other'),
      reader: caller('svc:readers:app'),
    });
    const stranger = exchange('Bearer stranger');
    expect(await run(stage, stranger)).toBe('caller_forbidden');
    expect(stranger.callerCheck).toBe('forbidden');
    expect(stranger.caller).toBeUndefined();
    const writing = exchange('Bearer reader', 'POST', '/v1.0/x');
    expect(await run(stage, writing)).toBe('caller_forbidden');
    expect(writing.caller).toBe('readers');
    const elsewhere = exchange('Bearer reader', 'GET', '/beta/x');
    expect(await run(stage, elsewhere)).toBe('caller_forbidden');
    expect(await run(stage, exchange('Bearer reader', 'GET', '/v1.0/x'))).toBeUndefined();
    expect(counted).toEqual(['forbidden', 'forbidden', 'forbidden', 'remembered']);
  });

  it('forbids a method tunnelled through an override field that the rule does not allow', async () => {
    const { stage, counted } = setup({
      reader: caller('svc:readers:app'),
      reports: caller('svc:reports'),
    });
    for (const [field, value] of [
      ['x-http-method-override', 'DELETE'],
      ['x-http-method', 'put'],
      ['x-method-override', 'GET, POST'],
    ] as const) {
      const tunnelled = exchange('Bearer reader', 'GET', '/v1.0/x', { [field]: value });
      expect(await run(stage, tunnelled)).toBe('caller_forbidden');
      expect(tunnelled.callerCheck).toBe('forbidden');
    }
    // A method the rule allows, and a rule without a method limit, let it through.
    const same = exchange('Bearer reader', 'GET', '/v1.0/x', { 'x-http-method-override': 'get' });
    expect(await run(stage, same)).toBeUndefined();
    const unlimited = exchange('Bearer reports', 'GET', '/v1.0/x', {
      'x-http-method-override': 'DELETE',
    });
    expect(await run(stage, unlimited)).toBeUndefined();
    expect(counted).toEqual(['forbidden', 'forbidden', 'forbidden', 'remembered', 'remembered']);
  });

  it('walks the rules once per verified caller: a remembered token costs no rule matching', async () => {
    const reports = caller('svc:reports');
    const stranger = caller('svc:other');
    const { stage, counted, rules } = setup({ known: reports, stranger });
    const ruleFor = vi.spyOn(rules, 'ruleFor');
    for (let i = 0; i < 3; i++) {
      const ex = exchange('Bearer known');
      expect(await run(stage, ex)).toBeUndefined();
      expect(ex.caller).toBe('reports');
      expect(await run(stage, exchange('Bearer stranger'))).toBe('caller_forbidden');
    }
    expect(ruleFor.mock.calls).toEqual([['svc:reports'], ['svc:other']]);
    expect(counted.filter((r) => r === 'remembered')).toHaveLength(3);
    expect(counted.filter((r) => r === 'forbidden')).toHaveLength(3);
    // The same subject verified anew (a new token, or the keys changed): a new verdict, whose
    // rule is found again.
    const renewed = setup({
      old: Promise.resolve(caller('svc:reports')),
      rotated: Promise.resolve(caller('svc:reports')),
    });
    const again = vi.spyOn(renewed.rules, 'ruleFor');
    expect(await run(renewed.stage, exchange('Bearer old'))).toBeUndefined();
    expect(await run(renewed.stage, exchange('Bearer rotated'))).toBeUndefined();
    expect(again).toHaveBeenCalledTimes(2);
  });
});
