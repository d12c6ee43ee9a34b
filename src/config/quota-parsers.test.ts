import { describe, expect, it } from 'vitest';
import { parseValue } from './parsers.js';
import {
  CALLER_NAME,
  MAX_CONFIGURED_CALLERS,
  callerHeader,
  callerName,
  callerPolicies,
  rateLimit,
} from './quota-parsers.js';

describe('quota.caller', () => {
  it('folds a Kubernetes label value to lower case', () => {
    expect(parseValue(callerName(), ' Reports-UI_2.a ')).toEqual({
      ok: true,
      value: 'reports-ui_2.a',
    });
    expect(CALLER_NAME.test('x'.repeat(64))).toBe(true);
  });

  it('refuses other characters, an empty name and one longer than 64', () => {
    for (const raw of ['', 'a b', 'a/b', 'x'.repeat(65), 7]) {
      expect(parseValue(callerName(), raw)).toMatchObject({
        ok: false,
        problems: [expect.stringMatching(/^must be 1 to 64 of a-z, 0-9/)],
      });
    }
  });
});

describe('quota.callerHeader', () => {
  it('is a header name in lower case', () => {
    expect(parseValue(callerHeader(), 'X-Caller')).toEqual({ ok: true, value: 'x-caller' });
  });

  it('refuses a non-token and the headers that carry credentials or framing', () => {
    expect(parseValue(callerHeader(), 'x caller')).toEqual({
      ok: false,
      problems: ['must be a header field name (got "x caller"), e.g. x-caller'],
    });
    for (const name of ['Authorization', 'cookie', 'Host', 'transfer-encoding']) {
      expect(parseValue(callerHeader(), name)).toEqual({
        ok: false,
        problems: [
          `must not be ${name.toLowerCase()}: it carries credentials or framing, not a caller's name`,
        ],
      });
    }
  });
});

describe('quota.callers', () => {
  it('reads env name=weight[:priority] and YAML mappings, interactive by default', () => {
    expect(parseValue(callerPolicies(), 'ui=3, nightly=1:batch')).toEqual({
      ok: true,
      value: [
        { name: 'ui', weight: 3, priority: 'interactive' },
        { name: 'nightly', weight: 1, priority: 'batch' },
      ],
    });
    expect(
      parseValue(callerPolicies(), [
        { name: 'ui', weight: 1000 },
        { name: 'b', weight: 1, priority: 'batch' },
      ]),
    ).toEqual({
      ok: true,
      value: [
        { name: 'ui', weight: 1000, priority: 'interactive' },
        { name: 'b', weight: 1, priority: 'batch' },
      ],
    });
  });

  it('reports every fault of every caller at once, each naming its position', () => {
    expect(parseValue(callerPolicies(), 'c,UI=0:urgent,ok=1,ok=2')).toEqual({
      ok: false,
      problems: [
        'caller 1: must be name=weight[:interactive|batch] (got "c")',
        'caller 2: the name must be 1 to 64 of a-z, 0-9, ".", "_", "-" (got "UI")',
        'caller 2: the weight must be a whole number from 1 to 1000 (got "0")',
        'caller 2: the priority must be interactive or batch (got "urgent")',
        'caller 4: names the caller ok twice',
      ],
    });
    expect(parseValue(callerPolicies(), [{ name: 'a', weight: 1001, rank: 1 }, 5])).toEqual({
      ok: false,
      problems: [
        'caller 1: has only name, weight and priority (unknown: rank)',
        'caller 2: must be name=weight[:priority] or a mapping {name, weight, priority}',
      ],
    });
    expect(parseValue(callerPolicies(), [{ name: 'a', weight: 2.5 }])).toMatchObject({
      ok: false,
      problems: ['caller 1: the weight must be a whole number from 1 to 1000 (got "2.5")'],
    });
  });

  it('names at most MAX_CONFIGURED_CALLERS callers (each is a metric label)', () => {
    const many = (n: number): string => Array.from({ length: n }, (_, i) => `c${i}=1`).join(',');
    expect(parseValue(callerPolicies(), many(MAX_CONFIGURED_CALLERS)).ok).toBe(true);
    expect(parseValue(callerPolicies(), many(MAX_CONFIGURED_CALLERS + 1))).toEqual({
      ok: false,
      problems: [
        `names ${MAX_CONFIGURED_CALLERS + 1} callers; at most 100 (each is a metric label)`,
      ],
    });
    expect(parseValue(callerPolicies(), { ui: 1 })).toMatchObject({ ok: false });
  });
});

describe('upstream.rateLimit', () => {
  it('reads N/s, N/m and N/h', () => {
    expect(parseValue(rateLimit(), '500/h')).toEqual({
      ok: true,
      value: { count: 500, periodMs: 3_600_000 },
    });
    expect(parseValue(rateLimit(), '10 / M')).toEqual({
      ok: true,
      value: { count: 10, periodMs: 60_000 },
    });
    expect(parseValue(rateLimit(), '1/s')).toEqual({
      ok: true,
      value: { count: 1, periodMs: 1_000 },
    });
  });

  it('refuses zero, another period and a bare number', () => {
    for (const raw of ['0/s', '5/d', '500', '-1/s']) {
      expect(parseValue(rateLimit(), raw)).toEqual({
        ok: false,
        problems: [`must be N/s, N/m or N/h with N at least 1, e.g. 500/h (got "${raw}")`],
      });
    }
    expect(parseValue(rateLimit(), '')).toEqual({
      ok: false,
      problems: ['must be N/s, N/m or N/h, e.g. 500/h'],
    });
  });
});
