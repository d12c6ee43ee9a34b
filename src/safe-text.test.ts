import { describe, expect, it } from 'vitest';
import {
  clean,
  describeCause,
  MAX_DESCRIPTION_CHARS,
  redact,
  safeLocation,
  safeUrl,
  typeName,
  UNTRUSTED_CA_HINT,
} from './safe-text.js';

describe('foreign text in logs and messages', () => {
  it('takes control characters out (no forged log lines) and caps the length', () => {
    expect(clean('a\r\nX-Injected: 1\u2028b')).toBe('a  X-Injected: 1 b');
    expect(clean('x'.repeat(500))).toHaveLength(MAX_DESCRIPTION_CHARS + 1);
  });

  it('shows URLs and Locations without user-info or query', () => {
    expect(safeUrl('https://user:pw@api.example/v1/x?token=abc')).toBe('https://api.example/v1/x');
    expect(safeLocation('/login?code=secret')).toBe('/login');
    expect(safeLocation('https://u:p@idp.example/a?b=c')).toBe('https://idp.example/a');
    expect(redact('GET /v1/x?token=abc failed', 'https://h/v1/x?token=abc')).toBe(
      'GET /v1/x?… failed',
    );
  });

  it('names the real cause under undici’s "fetch failed", with the fix for an untrusted CA', () => {
    const cause = Object.assign(new Error('self-signed certificate in certificate chain'), {
      code: 'SELF_SIGNED_CERT_IN_CHAIN',
    });
    expect(describeCause(new Error('fetch failed', { cause }))).toBe(
      `SELF_SIGNED_CERT_IN_CHAIN self-signed certificate in certificate chain (${UNTRUSTED_CA_HINT})`,
    );
    expect(describeCause('not an error')).toBe('unknown error');
  });

  it('says what kind of value arrived, never the value', () => {
    expect(typeName('secret')).toBe('a string');
    expect(typeName('')).toBe('an empty string');
    expect(typeName([1])).toBe('an array');
    expect(typeName(null)).toBe('null');
    expect(typeName(3)).toBe('a number');
  });
});
