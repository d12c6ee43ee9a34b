import { describe, expect, it } from 'vitest';
import type { CallerRule } from '../config/types.js';
import { CallerRules, ruleAllows } from './rules.js';

const rule = (over: Partial<CallerRule> & Pick<CallerRule, 'subject' | 'caller'>): CallerRule => ({
  match: 'exact',
  methods: undefined,
  paths: undefined,
  ...over,
});

describe('CallerRules', () => {
  const reports = rule({ subject: 'system:serviceaccount:apps:reports', caller: 'reports' });
  const research = rule({
    subject: 'system:serviceaccount:research:',
    match: 'prefix',
    caller: 'research',
  });
  const anyone = rule({ subject: '', match: 'prefix', caller: 'rest' });

  it('matches an exact subject only as written', () => {
    const rules = new CallerRules([reports]);
    expect(rules.ruleFor('system:serviceaccount:apps:reports')).toBe(reports);
    expect(rules.ruleFor('system:serviceaccount:apps:reports2')).toBeUndefined();
    expect(rules.ruleFor('system:serviceaccount:apps:report')).toBeUndefined();
  });

  it('matches a prefix with its separator, never a longer sibling namespace', () => {
    const rules = new CallerRules([research]);
    expect(rules.ruleFor('system:serviceaccount:research:app')).toBe(research);
    expect(rules.ruleFor('system:serviceaccount:research-x:app')).toBeUndefined();
  });

  it('lets the first matching rule decide', () => {
    const rules = new CallerRules([reports, anyone, research]);
    expect(rules.ruleFor('system:serviceaccount:apps:reports')).toBe(reports);
    // `anyone` comes before `research`, so it decides for a research subject too.
    expect(rules.ruleFor('system:serviceaccount:research:app')).toBe(anyone);
  });

  it('finds no rule when none is given', () => {
    expect(new CallerRules([]).ruleFor('anyone')).toBeUndefined();
  });
});

describe('ruleAllows', () => {
  it('allows every method and path when the rule names none', () => {
    const open = rule({ subject: 's', caller: 'c' });
    expect(ruleAllows(open, 'DELETE', '/v1.0/anything')).toBe(true);
  });

  it('limits methods, comparing them case-insensitively', () => {
    const reader = rule({ subject: 's', caller: 'c', methods: ['GET', 'HEAD'] });
    expect(ruleAllows(reader, 'get', '/v1.0/x')).toBe(true);
    expect(ruleAllows(reader, 'HEAD', '/v1.0/x')).toBe(true);
    expect(ruleAllows(reader, 'POST', '/v1.0/x')).toBe(false);
  });

  it('limits paths to the listed prefixes', () => {
    const scoped = rule({ subject: 's', caller: 'c', paths: ['/v1.0/contracts/', '/beta/'] });
    expect(ruleAllows(scoped, 'GET', '/v1.0/contracts/42?x=1')).toBe(true);
    expect(ruleAllows(scoped, 'GET', '/beta/')).toBe(true);
    expect(ruleAllows(scoped, 'GET', '/v1.0/prices')).toBe(false);
    expect(ruleAllows(scoped, 'GET', '/v1.0/contracts')).toBe(false);
  });

  it('needs both the method and the path', () => {
    const both = rule({ subject: 's', caller: 'c', methods: ['GET'], paths: ['/beta/'] });
    expect(ruleAllows(both, 'POST', '/beta/x')).toBe(false);
    expect(ruleAllows(both, 'GET', '/v1.0/x')).toBe(false);
    expect(ruleAllows(both, 'GET', '/beta/x')).toBe(true);
  });
});
