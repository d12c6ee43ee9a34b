import { describe, expect, it } from 'vitest';
import type { Req } from './http.js';
import { createState } from './state.js';
import {
  NO_STORE,
  credentialsOk,
  normaliseGrant,
  oauthError,
  parseBody,
  recognisedGrant,
  tokenBody,
  type ParsedRequest,
} from './token-wire.js';

const req = (headers: Record<string, string>): Req => ({ headers }) as unknown as Req;
const json = (body: unknown, headers: Record<string, string> = {}) =>
  parseBody(
    req({ 'content-type': 'application/json; charset=utf-8', ...headers }),
    Buffer.from(JSON.stringify(body)),
  );
const form = (body: string, headers: Record<string, string> = {}) =>
  parseBody(
    req({ 'content-type': 'Application/X-WWW-Form-URLencoded', ...headers }),
    Buffer.from(body),
  );
const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

describe('parseBody', () => {
  it('reads format A (JSON, camelCase) with the credentials in the body', () => {
    expect(
      json({ grantType: 'clientCredentials', clientId: 'id', clientSecret: 's', scopes: 'read' }),
    ).toEqual({
      format: 'json',
      grantType: 'clientCredentials',
      clientId: 'id',
      clientSecret: 's',
      auth: 'body',
      refreshToken: undefined,
      scopes: 'read',
    });
  });

  it('reads format B (form, snake_case); a Basic header wins over the body', () => {
    expect(
      form('grant_type=refresh_token&refresh_token=rt_1&client_id=body-id&scope=a+b', {
        authorization: basic('basic-id', 'p:w'),
      }),
    ).toEqual({
      format: 'form',
      grantType: 'refresh_token',
      clientId: 'basic-id',
      clientSecret: 'p:w',
      auth: 'basic',
      refreshToken: 'rt_1',
      scopes: 'a b',
    });
    expect(form('grant_type=client_credentials')).toMatchObject({ auth: 'none' });
  });

  it('answers why a body cannot be read', () => {
    const bad = (type: string, body: string) =>
      parseBody(req({ 'content-type': type }), Buffer.from(body));
    expect(bad('application/json', '{')).toBe('the body is not valid JSON');
    expect(bad('application/json', '[1]')).toBe('the JSON body must be an object');
    expect(bad('text/plain', 'x')).toBe(
      'unsupported Content-Type "text/plain": use application/json or application/x-www-form-urlencoded',
    );
  });

  it('takes only string fields from JSON', () => {
    expect(json({ grantType: 7, clientId: ['x'] })).toMatchObject({
      grantType: undefined,
      clientId: undefined,
      auth: 'none',
    });
  });
});

describe('credentialsOk', () => {
  it('matches the current client, also when Basic form-encoded the pair (RFC 6749 §2.3.1)', async () => {
    const state = await createState({ clientId: 'my client', clientSecret: 's+cr:t' });
    const ok = (parsed: ReturnType<typeof json>) => credentialsOk(state, parsed as ParsedRequest);
    expect(ok(json({ clientId: 'my client', clientSecret: 's+cr:t' }))).toBe(true);
    expect(ok(json({ clientId: 'my client', clientSecret: 's+cr:T' }))).toBe(false);
    expect(ok(json({ clientId: 'my client', clientSecret: 's+cr:' }))).toBe(false);
    expect(ok(json({ clientId: 'my client' }))).toBe(false);
    const encoded = { authorization: basic('my+client', 's%2Bcr%3At') };
    expect(ok(form('grant_type=client_credentials', encoded))).toBe(true);
    // Only Basic is form-decoded: in the body the encoded pair is a different secret.
    expect(ok(json({ clientId: 'my+client', clientSecret: 's%2Bcr%3At' }))).toBe(false);
  });
});

describe('grants', () => {
  it('recognises each grant only as its own format spells it', () => {
    const parsed = (format: 'json' | 'form', grantType: string): ParsedRequest => ({
      format,
      grantType,
      clientId: undefined,
      clientSecret: undefined,
      auth: 'none',
      refreshToken: undefined,
      scopes: undefined,
    });
    expect(recognisedGrant(parsed('json', 'clientCredentials'))).toBe('client_credentials');
    expect(recognisedGrant(parsed('json', 'refreshToken'))).toBe('refresh_token');
    expect(recognisedGrant(parsed('form', 'refresh_token'))).toBe('refresh_token');
    expect(recognisedGrant(parsed('json', 'client_credentials'))).toBeUndefined();
    expect(normaliseGrant(parsed('form', 'client_credentials'))).toBe('client_credentials');
    expect(normaliseGrant(parsed('form', 'password'))).toBe('password');
  });
});

describe('answer bodies', () => {
  const set = { accessToken: 'at_1', refreshToken: 'rt_1', expiresIn: 60 };

  it('use the casing of the request', () => {
    expect(tokenBody('json', set, 'new')).toEqual({
      accessToken: 'at_1',
      refreshToken: 'rt_1',
      tokenType: 'Bearer',
      expiresIn: 60,
    });
    expect(tokenBody('form', set, 'new')).toEqual({
      access_token: 'at_1',
      refresh_token: 'rt_1',
      token_type: 'Bearer',
      expires_in: 60,
    });
  });

  it('carry a null refresh token or none, as asked', () => {
    expect(tokenBody('json', set, 'null')).toMatchObject({ refreshToken: null });
    expect(Object.keys(tokenBody('form', set, 'omit'))).toEqual([
      'access_token',
      'token_type',
      'expires_in',
    ]);
  });

  it('errors are RFC 6749 §5.2 bodies, never cached', () => {
    expect(oauthError('invalid_grant', 'used')).toEqual({
      error: 'invalid_grant',
      error_description: 'used',
    });
    expect(NO_STORE).toEqual({ 'cache-control': 'no-store', pragma: 'no-cache' });
  });
});
