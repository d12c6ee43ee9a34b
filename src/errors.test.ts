import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  PROXY_ERROR_STATUS,
  SidecarError,
  TokenEndpointError,
  TokenUnavailableError,
  asSidecarError,
  errorEnvelope,
  isRejectedGrant,
} from './errors.js';

describe('errors', () => {
  it('maps every proxy error code to the status docs/reference.md gives', () => {
    // The table is read from the docs, so neither restates the other.
    const table = readFileSync(new URL('../docs/reference.md', import.meta.url), 'utf8');
    const documented = Object.fromEntries(
      [...table.matchAll(/^\| (\d{3}) \| `([a-z_]+)` \|/gm)].map((m) => [m[2], Number(m[1])]),
    );
    expect(PROXY_ERROR_STATUS).toEqual(documented);
  });

  it('turns an unknown error into internal_error without exposing its message', () => {
    const err = asSidecarError(new Error('EACCES /secret/path'));
    expect(err.code).toBe('internal_error');
    expect(err.status).toBe(500);
    expect(err.message).not.toContain('/secret/path');
    const known = new SidecarError('bad_request', 'x');
    expect(asSidecarError(known)).toBe(known);
  });

  it('builds the API envelope with the request id', () => {
    const err = new SidecarError('not_found', 'path is not forwarded');
    expect(errorEnvelope(err, 'abc')).toEqual({
      errors: [{ code: 'not_found', detail: 'path is not forwarded' }],
      requestId: 'abc',
    });
    expect(err.status).toBe(404);
  });

  it('rounds Retry-After up to whole seconds, at least 1', () => {
    expect(new TokenUnavailableError('x', 0.2).retryAfterSeconds).toBe(1);
    expect(new TokenUnavailableError('x', 4.1).retryAfterSeconds).toBe(5);
  });

  it('keeps a token endpoint body out of serialised errors', () => {
    const err = new TokenEndpointError('rejected', 'token endpoint answered 401', {
      status: 401,
      body: '{"access_token":"secret-value"}',
    });
    expect(JSON.stringify(err)).not.toContain('secret-value');
    expect((err as unknown as { body: string }).body).toContain('secret-value');
    expect(isRejectedGrant(err)).toBe(true);
    expect(isRejectedGrant(new TokenEndpointError('server', 'x'))).toBe(false);
    expect(isRejectedGrant(new Error('x'))).toBe(false);
  });

  it('lists every configuration problem', () => {
    const err = new ConfigError(['UPSTREAM_BASE_URL: required', 'LOG_LEVEL: unknown']);
    expect(err.message).toContain('UPSTREAM_BASE_URL: required');
    expect(err.message).toContain('LOG_LEVEL: unknown');
  });
});

describe('SidecarError', () => {
  it('carries no stack trace (an answer, not a bug) and leaves Error.stackTraceLimit as it was', () => {
    const limit = Error.stackTraceLimit;
    const error = new SidecarError('overloaded', 'busy', { retryAfterSeconds: 1 });
    expect(Error.stackTraceLimit).toBe(limit);
    expect(error.stack ?? '').not.toMatch(/\n\s+at /);
    expect(new Error('a bug').stack).toMatch(/\n\s+at /);
    expect(error).toMatchObject({ code: 'overloaded', status: 503, retryAfterSeconds: 1 });
  });
});
