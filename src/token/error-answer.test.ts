/**
 * Token endpoint answers that are no token, checked with hand-made answers (docs/design.md
 * "Practices" 1): the kind, Retry-After, the OAuth error, and never the body or a secret in the
 * message.
 */
import { describe, expect, it } from 'vitest';
import { TokenEndpointError } from '../errors.js';
import { isObject, redirectError, statusError } from './error-answer.js';
import { tokenAnswer } from './wire.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const clock = { now: () => T0 };

describe('statusError', () => {
  it('4xx other than 429 is rejected, with the OAuth error and its description', () => {
    const body = JSON.stringify({ error: 'invalid_client', error_description: 'unknown client' });
    const error = statusError(
      tokenAnswer(401, { 'content-type': 'application/json' }, body, false),
      clock,
    );
    expect(error).toBeInstanceOf(TokenEndpointError);
    expect(error).toMatchObject({ kind: 'rejected', status: 401, oauthError: 'invalid_client' });
    expect(error.message).toBe('token endpoint answered 401 invalid_client: unknown client');
    expect(error.retryAfterMs).toBeUndefined();
  });

  it('429, 5xx and 1xx are server errors; Retry-After is read in ms and shown in seconds', () => {
    for (const status of [429, 500, 503, 103]) {
      const error = statusError(tokenAnswer(status, { 'retry-after': '7' }, '', false), clock);
      expect(error.kind).toBe('server');
      expect(error.retryAfterMs).toBe(7_000);
      expect(error.message).toBe(`token endpoint answered ${status} (retry after 7 s)`);
    }
    expect(statusError(tokenAnswer(499, {}, '', false), clock).kind).toBe('rejected');
  });

  it('Retry-After as a date counts from the answer’s Date, less its Age', () => {
    const headers = {
      'retry-after': 'Tue, 01 Jan 2030 00:01:00 GMT',
      date: 'Tue, 01 Jan 2030 00:00:00 GMT',
      age: '10',
    };
    const error = statusError(tokenAnswer(503, headers, '', false), { now: () => T0 + 3_600_000 });
    expect(error.retryAfterMs).toBe(50_000);
  });

  it('the API’s own {"errors":[{code, detail}]} is read like an OAuth error', () => {
    const body = JSON.stringify({
      errors: [{ code: 'invalid_grant', detail: 'refresh token expired' }],
    });
    const error = statusError(tokenAnswer(400, {}, body, false), clock);
    expect(error.oauthError).toBe('invalid_grant');
    expect(error.message).toBe('token endpoint answered 400 invalid_grant: refresh token expired');
  });

  it('a body that is no OAuth error is described, never echoed; the body stays off the JSON', () => {
    const body = '<html>client_secret=hunter2-secret</html>';
    const error = statusError(
      tokenAnswer(502, { 'content-type': 'text/html' }, body, false),
      clock,
    );
    expect(error.message).toMatch(/^token endpoint answered 502 \(/);
    expect(error.message).not.toContain('hunter2');
    expect(error.oauthError).toBeUndefined();
    expect((error as unknown as { body: string }).body).toBe(body);
    expect(JSON.stringify(error)).not.toContain('hunter2');
    expect(Object.keys(error)).not.toContain('body');
  });

  it('a body over the cap adds nothing to the message', () => {
    const error = statusError(tokenAnswer(500, {}, '', true), clock);
    expect(error.message).toBe('token endpoint answered 500');
  });

  it('an empty or non-string OAuth error code is not an OAuth error', () => {
    const blank = statusError(tokenAnswer(400, {}, '{"error":"  "}', false), clock);
    expect(blank.oauthError).toBeUndefined();
    const numeric = statusError(tokenAnswer(400, {}, '{"error":42}', false), clock);
    expect(numeric.oauthError).toBeUndefined();
  });
});

describe('redirectError', () => {
  it('names the target without user-info or query; redirects are not followed', () => {
    const error = redirectError(
      tokenAnswer(302, { location: 'https://user:pw@login.example/oauth?code=secret' }, '', false),
    );
    expect(error).toMatchObject({ kind: 'redirect', status: 302 });
    expect(error.message).toBe(
      'token endpoint answered 302 redirect to https://login.example/oauth; redirects are not followed',
    );
    expect(redirectError(tokenAnswer(307, {}, '', false)).message).toContain('(no Location)');
  });
});

describe('isObject', () => {
  it('is a plain object, not null or an array', () => {
    expect(isObject({})).toBe(true);
    expect(isObject(null)).toBe(false);
    expect(isObject([])).toBe(false);
    expect(isObject('x')).toBe(false);
  });
});
