import { describe, expect, it } from 'vitest';
import { basicAuthorization, encodeGrantRequest, formUrlEncode } from './dialects.js';
import type { GrantRequest } from './types.js';

const cc: GrantRequest = {
  grant: 'client_credentials',
  credentials: { clientId: 'demo-client', clientSecret: 'demo-secret' },
};
const refresh: GrantRequest = { grant: 'refresh_token', refreshToken: 'rt-1' };
const basic = `Basic ${Buffer.from('demo-client:demo-secret').toString('base64')}`;

describe('encodeGrantRequest, json (API format A)', () => {
  it('client credentials in the body, scopes comma-joined', () => {
    const out = encodeGrantRequest({ format: 'json', clientAuth: 'body', scopes: ['a', 'b'] }, cc);
    expect(out.headers).toEqual({ accept: 'application/json', 'content-type': 'application/json' });
    expect(out.body).toBe(
      '{"grantType":"clientCredentials","clientId":"demo-client","clientSecret":"demo-secret","scopes":"a,b"}',
    );
  });

  it('client credentials in a Basic header, no scopes', () => {
    const out = encodeGrantRequest({ format: 'json', clientAuth: 'basic', scopes: [] }, cc);
    expect(out.headers).toEqual({
      accept: 'application/json',
      'content-type': 'application/json',
      authorization: basic,
    });
    expect(out.body).toBe('{"grantType":"clientCredentials"}');
  });

  it.each(['body', 'basic'] as const)(
    'refresh grant (%s) carries no credentials nor scopes',
    (auth) => {
      const out = encodeGrantRequest({ format: 'json', clientAuth: auth, scopes: ['a'] }, refresh);
      expect(out.headers).toEqual({
        accept: 'application/json',
        'content-type': 'application/json',
      });
      expect(out.body).toBe('{"grantType":"refreshToken","refreshToken":"rt-1"}');
    },
  );
});

describe('encodeGrantRequest, form (RFC 6749, API format B)', () => {
  it('client credentials in the body, scope space-joined', () => {
    const out = encodeGrantRequest({ format: 'form', clientAuth: 'body', scopes: ['a', 'b'] }, cc);
    expect(out.headers).toEqual({
      accept: 'application/json',
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(out.body).toBe(
      'grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret&scope=a+b',
    );
  });

  it('client credentials in a Basic header', () => {
    const out = encodeGrantRequest({ format: 'form', clientAuth: 'basic', scopes: [] }, cc);
    expect(out.headers.authorization).toBe(basic);
    expect(out.body).toBe('grant_type=client_credentials');
  });

  it.each(['body', 'basic'] as const)('refresh grant (%s) carries no credentials', (auth) => {
    const out = encodeGrantRequest({ format: 'form', clientAuth: auth, scopes: ['a'] }, refresh);
    expect(out.headers.authorization).toBeUndefined();
    expect(out.body).toBe('grant_type=refresh_token&refresh_token=rt-1');
  });

  it('encodes special characters', () => {
    const out = encodeGrantRequest(
      { format: 'form', clientAuth: 'body', scopes: [] },
      { grant: 'client_credentials', credentials: { clientId: 'a b', clientSecret: 'x&y=z+/' } },
    );
    expect(new URLSearchParams(out.body).get('client_secret')).toBe('x&y=z+/');
    expect(new URLSearchParams(out.body).get('client_id')).toBe('a b');
  });
});

describe('basicAuthorization', () => {
  it('is base64(id:secret) for plain ids', () => {
    expect(basicAuthorization({ clientId: 'demo-client', clientSecret: 'demo-secret' })).toBe(
      basic,
    );
  });

  it('form-urlencodes id and secret first (RFC 6749 §2.3.1)', () => {
    const header = basicAuthorization({ clientId: 'a:b', clientSecret: 'p%s s+é' });
    const decoded = Buffer.from(header.slice('Basic '.length), 'base64').toString('utf8');
    expect(decoded).toBe('a%3Ab:p%25s+s%2B%C3%A9');
    const [id, secret] = decoded.split(':').map((s) => decodeURIComponent(s.replace(/\+/g, ' ')));
    expect(id).toBe('a:b');
    expect(secret).toBe('p%s s+é');
  });

  it('formUrlEncode keeps unreserved characters', () => {
    expect(formUrlEncode('Az09-._*')).toBe('Az09-._*');
  });
});
