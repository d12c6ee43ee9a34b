import { describe, expect, it } from 'vitest';
import { connectionListed, HOP_BY_HOP } from './hop-by-hop.js';

describe('connectionListed', () => {
  it('parses comma lists across several values, case-insensitively', () => {
    expect([...connectionListed(['Close, X-A', ' ,x-b,'])]).toEqual(['close', 'x-a', 'x-b']);
  });
});

describe('HOP_BY_HOP', () => {
  it('holds the fields of RFC 9110 §7.6.1 and the legacy Keep-Alive and Proxy-Connection', () => {
    for (const name of [
      'connection',
      'keep-alive',
      'proxy-connection',
      'te',
      'transfer-encoding',
      'upgrade',
    ]) {
      expect(HOP_BY_HOP.has(name)).toBe(true);
    }
  });
});
