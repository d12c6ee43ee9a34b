import { describe, expect, it } from 'vitest';
import {
  MAX_VARIANTS,
  VARIANT_OVERHEAD_BYTES,
  answerSize,
  createCacheEntries,
  type StoredAnswer,
} from './entries.js';

function answer(
  key: string,
  body: string,
  vary: string[] = [],
  values: string[] = [],
): StoredAnswer {
  const headers = { 'content-length': String(body.length) };
  return {
    headers,
    body: Buffer.from(body),
    storedAt: 0,
    expiresAt: 1_000,
    staleIfErrorUntil: 1_000,
    staleWhileRevalidateUntil: 1_000,
    vary,
    varyValues: values,
    size: answerSize(key, headers, body.length, vary),
  };
}

describe('response store', () => {
  it('keeps its bytes exact through replace, evict and invalidate', () => {
    const reported: number[] = [];
    // Room for two 600-byte answers with their headers and bookkeeping, not three.
    const maxBytes = 2 * (VARIANT_OVERHEAD_BYTES + 700);
    const store = createCacheEntries({ maxBytes }, (b) => reported.push(b));
    const a = answer('/a\n\n', 'x'.repeat(600));
    store.put('/a\n\n', '/a', a);
    store.put('/a\n\n', '/a', a);
    expect(store.stats()).toEqual({ entries: 1, bytes: a.size, maxBytes });
    store.put('/b\n\n', '/b', answer('/b\n\n', 'y'.repeat(600)));
    store.put('/c\n\n', '/c', answer('/c\n\n', 'z'.repeat(600)));
    // Three do not fit: /a goes.
    expect(store.stats().entries).toBe(2);
    expect(store.lookup('/a\n\n', '/a', {}, 0).kind).toBe('uri-miss');
    store.invalidatePath('/b');
    expect(store.lookup('/b\n\n', '/b', {}, 0).kind).toBe('uri-miss');
    expect(store.stats().entries).toBe(1);
    expect(reported.at(-1)).toBe(store.stats().bytes);
  });

  it('tells a URI with nothing stored from one stored for another Accept, after evictions too', () => {
    const store = createCacheEntries({ maxBytes: VARIANT_OVERHEAD_BYTES + 700 });
    store.put('/a?q\ntext/csv\n', '/a', answer('/a?q\ntext/csv\n', 'x'.repeat(600)));
    expect(store.lookup('/a?q\n\n', '/a', {}, 0).kind).toBe('miss');
    expect(store.lookup('/a?r\n\n', '/a', {}, 0).kind).toBe('uri-miss');
    store.put('/b\n\n', '/b', answer('/b\n\n', 'y'.repeat(600)));
    store.put('/c\n\n', '/c', answer('/c\n\n', 'z'.repeat(600)));
    expect(store.lookup('/a?q\n\n', '/a', {}, 0).kind).toBe('uri-miss');
  });

  it('holds at most maxEntries answers, evicting the least recently used', () => {
    const store = createCacheEntries({ maxBytes: 1 << 20, maxEntries: 2 });
    for (const path of ['/a', '/b']) store.put(`${path}\n\n`, path, answer(`${path}\n\n`, 'x'));
    store.lookup('/a\n\n', '/a', {}, 0); // /a is now the most recent
    store.put('/c\n\n', '/c', answer('/c\n\n', 'x'));
    expect(store.stats().entries).toBe(2);
    expect(store.lookup('/b\n\n', '/b', {}, 0).kind).toBe('uri-miss');
    expect(store.lookup('/a\n\n', '/a', {}, 0).kind).toBe('hit');
  });

  it('charges an answer its key, header names and values, body and a fixed overhead', () => {
    const key = '/v1.0/contracts/?page=7\napplication/json\ngzip';
    const headers = {
      'content-type': 'application/json',
      'content-length': '250',
      'x-tags': ['a', 'bc'],
    };
    expect(answerSize(key, headers, 250, [])).toBe(
      VARIANT_OVERHEAD_BYTES +
        key.length +
        250 +
        'content-type'.length +
        'application/json'.length +
        'content-length'.length +
        '250'.length +
        'x-tags'.length +
        'abc'.length,
    );
  });

  it('holds no more small answers than maxBytes pays for at the fixed overhead each', () => {
    const store = createCacheEntries({ maxBytes: 1 << 20 });
    for (let i = 0; i < 5_000; i++) {
      const key = `/v1.0/contracts/?page=${i}\n\n`;
      store.put(key, '/v1.0/contracts/', answer(key, 'x'.repeat(10)));
    }
    const { entries, bytes } = store.stats();
    expect(bytes).toBeLessThanOrEqual(1 << 20);
    expect(entries).toBeLessThanOrEqual(Math.floor((1 << 20) / VARIANT_OVERHEAD_BYTES));
    expect(bytes).toBeGreaterThanOrEqual(entries * VARIANT_OVERHEAD_BYTES);
  });

  it('counts the request values Vary selected: a client cannot make them free', () => {
    const headers = { 'content-length': '1' };
    const small = answerSize('/a\n\n', headers, 1, ['x-pad'], ['p']);
    const padded = answerSize('/a\n\n', headers, 1, ['x-pad'], ['p'.repeat(12_000)]);
    expect(padded - small).toBe(11_999);
  });

  it('refuses an answer larger than the whole cache without keeping an index for it', () => {
    const store = createCacheEntries({ maxBytes: 500 });
    store.put('/a\n\n', '/a', answer('/a\n\n', 'x'.repeat(600)));
    expect(store.stats()).toMatchObject({ entries: 0, bytes: 0 });
    expect(store.lookup('/a?q\n\n', '/a', {}, 0).kind).toBe('uri-miss');
  });

  it('keeps at most MAX_VARIANTS selections per key, newest first', () => {
    const store = createCacheEntries({ maxBytes: 1 << 20 });
    for (let i = 0; i <= MAX_VARIANTS; i++) {
      store.put('/v\n\n', '/v', answer('/v\n\n', `v${i}`, ['accept-language'], [`l${i}`]));
    }
    expect(store.stats().entries).toBe(MAX_VARIANTS);
    expect(store.lookup('/v\n\n', '/v', { 'accept-language': 'l0' }, 0).kind).toBe('vary-miss');
    const last = store.lookup('/v\n\n', '/v', { 'accept-language': `l${MAX_VARIANTS}` }, 0);
    expect(last.kind).toBe('hit');
  });

  it('bounds captures in progress by maxBytes', () => {
    const store = createCacheEntries({ maxBytes: 1_000 });
    expect(store.reserve(600)).toBe(true);
    expect(store.reserve(600)).toBe(false);
    store.release(600);
    expect(store.reserve(1_000)).toBe(true);
  });
});
