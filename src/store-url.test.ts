import { describe, expect, it } from 'vitest';
import { parseStoreUrl, redactStoreUrl } from './store-url.js';

describe('store URL', () => {
  it('reads several hosts, credentials and a database number; the password is kept for connecting only', () => {
    expect(parseStoreUrl('rediss://user:p%40ss@a.example:6380,b.example/2')).toEqual({
      tls: true,
      username: 'user',
      password: 'p@ss',
      db: 2,
      nodes: [
        { url: 'rediss://user:p%40ss@a.example:6380/2', host: 'a.example', port: 6380 },
        { url: 'rediss://user:p%40ss@b.example/2', host: 'b.example', port: undefined },
      ],
    });
  });

  it('names what is wrong without quoting the URL', () => {
    expect(parseStoreUrl('http://secret@x')).toEqual({ problem: 'the scheme is neither' });
    expect(parseStoreUrl('redis://a:1,,b:2')).toEqual({ problem: 'no host' });
    expect(parseStoreUrl('redis://secret@a/keys')).toEqual({
      problem: 'the path may only name a database number, e.g. /0',
    });
  });

  it('redacts the password and keeps the rest for display', () => {
    expect(redactStoreUrl('redis://user:secret@a:1,b:2/0')).toBe('redis://user@a:1,b:2/0');
    expect(redactStoreUrl('not a url secret')).toBe('(invalid URL)');
  });
});
