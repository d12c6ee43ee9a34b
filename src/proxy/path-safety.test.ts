import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { checkRequestTarget, pathForLog } from './path-safety.js';

const prefixes = ['/v1.0/', '/beta/'];
const verdict = (target: string) => checkRequestTarget(target, prefixes);

describe('checkRequestTarget', () => {
  it.each([
    '/v1.0/contracts/',
    '/v1.0/contracts/?limit=10&x=%2f..%5c',
    '/v1.0/contracts/a.b/..c/c../...',
    '/v1.0/x/a%2Eb/y.csv',
    '/beta/anything',
    '/v1.0/a//b',
    '/v1.0/name%20with%20spaces',
    '/v1.0/q?back\\slash=in-query',
    '/v1.0/q?a=..&b=%2e%2e',
  ])('forwards %s', (target) => {
    const result = verdict(target);
    expect(result.ok).toBe(true);
  });

  it.each(['/v1.0/c/p%00', '/v1.0/c/%0d%0aX: y', '/v1.0/c/?q=%0A', '/v1.0/c/%1F', '/v1.0/c/%7f'])(
    'refuses the encoded control character in %s',
    (target) => {
      expect(verdict(target.replace(' ', '%20'))).toEqual({
        ok: false,
        code: 'bad_request',
        reason: 'encoded control character in the request target',
      });
    },
  );

  it.each(['/v1.0/c/%20', '/v1.0/c/%7E', '/v1.0/c/?q=%2A%80%C3%A9'])('forwards %s', (target) => {
    expect(verdict(target).ok).toBe(true);
  });

  it('splits path and query without touching either', () => {
    expect(verdict('/v1.0/a%41?b=%2F&c')).toEqual({
      ok: true,
      path: '/v1.0/a%41',
      query: '?b=%2F&c',
    });
  });

  it.each([
    // dot segments, raw and encoded, any case, with and without `;params`
    '/v1.0/../admin',
    '/v1.0/..',
    '/v1.0/./x',
    '/v1.0/.',
    '/v1.0/%2e%2e/admin',
    '/v1.0/%2E%2e/admin',
    '/v1.0/%2E%2E/admin',
    '/v1.0/.%2e/admin',
    '/v1.0/%2e./admin',
    '/v1.0/%2e/admin',
    '/v1.0/..;/admin',
    '/v1.0/..;jsessionid=1/admin',
    '/v1.0/%252e%252e/admin',
    '/../v1.0/x',
    // encoded separators
    '/v1.0/a%2fb',
    '/v1.0/a%2Fb',
    '/v1.0/..%2fadmin',
    '/v1.0/a%5cb',
    '/v1.0/a%5Cb',
    '/v1.0/a%252fb',
    // backslashes in the path
    '/v1.0\\..\\admin',
    '/v1.0/a\\b',
    '/v1.0/a\\b?x=1',
    // non-origin forms
    'http://evil.example/v1.0/x',
    'https://api.sparkcommodities.com/v1.0/x',
    'HTTP://evil.example/v1.0/x',
    'api.sparkcommodities.com:443',
    '127.0.0.1:8080',
    '*',
    '',
    '//evil.example/v1.0/x',
    '//v1.0/x',
    // control, space, non-ASCII, fragments, broken escapes
    '/v1.0/a\u0000b',
    '/v1.0/a\rb',
    '/v1.0/a\nb',
    '/v1.0/a\tb',
    '/v1.0/a b',
    '/v1.0/a\u007fb',
    '/v1.0/caf\u00e9',
    '/v1.0/a#frag',
    '/v1.0/a%zz',
    '/v1.0/a%2',
    '/v1.0/q?x=\u0000',
  ])('refuses %j with bad_request', (target) => {
    const result = verdict(target);
    expect(result).toMatchObject({ ok: false, code: 'bad_request' });
  });

  it.each([
    '/',
    '/v1.0',
    '/v2.0/contracts/',
    '/V1.0/contracts/',
    '/v1%2E0/contracts/',
    '/admin',
    '/betax/',
  ])('answers %j with not_found', (target) => {
    expect(verdict(target)).toMatchObject({ ok: false, code: 'not_found' });
  });

  it('judges safety before the allow-list, so probing never maps the prefixes', () => {
    expect(verdict('/admin/../x')).toMatchObject({ code: 'bad_request' });
  });

  it('never echoes the target in its reason', () => {
    const result = verdict('/v1.0/<script>/../x');
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).not.toContain('<script>');
  });
});

describe('pathForLog', () => {
  it('drops the query and truncates', () => {
    expect(pathForLog('/v1.0/x?secret=1')).toBe('/v1.0/x');
    expect(pathForLog(`/${'a'.repeat(300)}`, 10)).toBe('/aaaaaaaaa…');
  });
});

describe('dot segments: the one-scan check agrees with a per-segment decode', () => {
  /** The reference: split into segments, decode %2e, drop a ;param tail, compare. */
  const hasDotSegment = (path: string): boolean =>
    path.split('/').some((segment) => {
      const name = segment.replace(/%2e/gi, '.').split(';', 1)[0] ?? '';
      return name === '.' || name === '..';
    });

  it('for paths made of dots, %2e, slashes, params and names', () => {
    const piece = fc.constantFrom('/', '.', '..', '%2e', '%2E', ';', ';x=1', 'a', 'v1.0', '...');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const path = `/${pieces.join('')}`;
        const verdict = checkRequestTarget(path, ['/']);
        const refusedForDots = !verdict.ok && verdict.reason === 'dot segment in the path';
        // Other rules may refuse first (they run before this one); only compare where they do not.
        if (!verdict.ok && !refusedForDots) return;
        expect(refusedForDots).toBe(hasDotSegment(path));
      }),
      { numRuns: 2000 },
    );
  });
});
