import { describe, expect, it } from 'vitest';
import { callerRules, describeRule, issuer, jwksUrl, MAX_CALLER_RULES } from './caller-parsers.js';
import { parseValue } from './parsers.js';

describe('issuer and jwksUrl', () => {
  it('take an https URL as written', () => {
    expect(parseValue(issuer(), 'https://kubernetes.default.svc')).toEqual({
      ok: true,
      value: 'https://kubernetes.default.svc',
    });
    expect(parseValue(jwksUrl(), 'https://idp.example/keys')).toEqual({
      ok: true,
      value: 'https://idp.example/keys',
    });
  });

  it('refuse plain http, a relative address and credentials in the URL', () => {
    expect(parseValue(jwksUrl(), 'http://idp.example/keys')).toEqual({
      ok: false,
      problems: [expect.stringMatching(/must use https:\/\//)],
    });
    expect(parseValue(issuer(), 'idp.example')).toEqual({
      ok: false,
      problems: [expect.stringMatching(/must be an absolute https:\/\/ URL/)],
    });
    const withSecret = parseValue(jwksUrl(), 'https://user:hunter2@idp.example/keys');
    expect(withSecret).toEqual({
      ok: false,
      problems: [expect.stringMatching(/must not contain credentials/)],
    });
    // The password is never echoed back.
    expect(JSON.stringify(withSecret)).not.toContain('hunter2');
  });
});

describe('callerRules', () => {
  it('parses env rules joined by ;, lower-casing the caller and upper-casing methods', () => {
    expect(
      parseValue(callerRules(), ' a:b=Reports ; ns:*=research get|HEAD /v1.0/|/beta/ ;'),
    ).toEqual({
      ok: true,
      value: [
        { subject: 'a:b', match: 'exact', caller: 'reports', methods: undefined, paths: undefined },
        {
          subject: 'ns:',
          match: 'prefix',
          caller: 'research',
          methods: ['GET', 'HEAD'],
          paths: ['/v1.0/', '/beta/'],
        },
      ],
    });
  });

  it('parses YAML mappings, a single method string, and env-style strings in a list', () => {
    expect(
      parseValue(callerRules(), [
        { subject: 'x', caller: 'one', methods: 'post' },
        'y*=two * /v1.0/',
      ]),
    ).toEqual({
      ok: true,
      value: [
        { subject: 'x', match: 'exact', caller: 'one', methods: ['POST'], paths: undefined },
        { subject: 'y', match: 'prefix', caller: 'two', methods: undefined, paths: ['/v1.0/'] },
      ],
    });
  });

  it('reports every problem of every rule, each with its position', () => {
    const result = parseValue(callerRules(), [
      { subject: 'a*b', caller: 'Bad Name!', methods: ['FETCH'], paths: ['relative'] },
      { subject: 'ok', caller: 'ok', extra: 1 },
      42,
      'no-equals-sign',
    ]);
    expect(result).toEqual({
      ok: false,
      problems: [
        expect.stringMatching(/^rule 1: the subject must be/),
        expect.stringMatching(/^rule 1: the caller must be/),
        expect.stringMatching(/^rule 1: methods must be/),
        expect.stringMatching(/^rule 1: paths must be/),
        expect.stringMatching(
          /^rule 2: has only subject, caller, methods and paths \(unknown: extra\)/,
        ),
        expect.stringMatching(/^rule 3: must be SUBJECT=CALLER/),
        expect.stringMatching(/^rule 4: must be SUBJECT=CALLER/),
      ],
    });
  });

  it('refuses a value that is neither a string nor a list, and too many rules', () => {
    expect(parseValue(callerRules(), { subject: 'a' })).toEqual({
      ok: false,
      problems: [expect.stringMatching(/joined by ; or a YAML list/)],
    });
    const many = Array.from({ length: MAX_CALLER_RULES + 1 }, (_, i) => `s${i}=c`).join(';');
    expect(parseValue(callerRules(), many)).toEqual({
      ok: false,
      problems: [`holds ${MAX_CALLER_RULES + 1} rules; at most ${MAX_CALLER_RULES}`],
    });
    expect(parseValue(callerRules(), '')).toEqual({ ok: true, value: [] });
  });
});

describe('describeRule', () => {
  it('writes a rule back as an operator would, and round-trips through the parser', () => {
    const written = 'ns:*=research GET|HEAD /v1.0/|/beta/';
    const parsed = parseValue(callerRules(), written);
    if (!parsed.ok) throw new Error(parsed.problems.join('; '));
    expect(describeRule(parsed.value[0]!)).toBe(written);
    expect(
      describeRule({
        subject: 'a',
        match: 'exact',
        caller: 'c',
        methods: undefined,
        paths: undefined,
      }),
    ).toBe('a=c *');
  });
});
