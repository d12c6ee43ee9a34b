import { describe, expect, it } from 'vitest';
import { CACHE_SCRIPTS } from './cache-entries.js';
import { defineScript } from './lua.js';
import { QUOTA_SCRIPTS } from './quota.js';
import { STORE_SCRIPTS } from './scripts.js';
import { TOKEN_SCRIPTS } from './token-sets.js';

describe('the store scripts', () => {
  it('one list holds every module’s scripts, each under its own name', () => {
    expect(STORE_SCRIPTS).toEqual([...TOKEN_SCRIPTS, ...QUOTA_SCRIPTS, ...CACHE_SCRIPTS]);
    expect(new Set(STORE_SCRIPTS.map((s) => s.name)).size).toBe(STORE_SCRIPTS.length);
    expect(STORE_SCRIPTS.length).toBe(14);
  });

  it('defining a script registers nothing: the same source gets the same name, the list is unchanged', () => {
    const before = [...STORE_SCRIPTS];
    const a = defineScript('return 1');
    expect(defineScript('return 1')).toEqual(a);
    expect(a.name).toBe(`oauthSidecar_${a.sha1.slice(0, 16)}`);
    expect(STORE_SCRIPTS).toEqual(before);
  });
});
