import { describe, expect, it } from 'vitest';
import { aliasOf, readYamlLayer, SECTIONS } from './yaml-layer.js';

const FILE = '/etc/oauth-sidecar/config.yaml';

async function layer(
  text: string,
): Promise<{ values: Record<string, unknown>; problems: string[] }> {
  const problems: string[] = [];
  const values = await readYamlLayer(FILE, () => Promise.resolve(text), problems);
  return { values: Object.fromEntries(values), problems };
}

describe('readYamlLayer', () => {
  it('flattens sections and subsections into dotted keys, top-level keys as they are', async () => {
    const { values, problems } = await layer(
      [
        'strictConfig: true',
        'upstream:',
        '  baseUrl: https://api.example.com',
        '  rateLimit: 500/h',
        'token:',
        '  store:',
        '    url: redis://redis:6379',
        'cache:',
        '  rules: [{prefix: /v1.0/, ttlSeconds: 60}]',
        'log:',
      ].join('\n'),
    );
    expect(problems).toEqual([]);
    expect(values).toEqual({
      strictConfig: true,
      'upstream.baseUrl': 'https://api.example.com',
      'upstream.rateLimit': '500/h',
      'token.store.url': 'redis://redis:6379',
      'cache.rules': [{ prefix: '/v1.0/', ttlSeconds: 60 }],
    });
  });

  it('an empty file is no values and no problem', async () => {
    expect(await layer('')).toEqual({ values: {}, problems: [] });
  });

  it('reports every unknown key with the file and the nearest known one', async () => {
    const { problems } = await layer(
      [
        'upstrem:',
        '  baseUrl: x',
        'upstream:',
        '  baseURL: x',
        '  nonsense: 1',
        'UPSTREAM_BASE_URL: x',
        'upstream.baseUrl: x',
      ].join('\n'),
    );
    expect(problems).toEqual([
      `upstrem: unknown key (in ${FILE}), did you mean upstream?`,
      `upstream.baseURL: unknown key (in ${FILE}), did you mean upstream.baseUrl?`,
      `upstream.nonsense: unknown key (in ${FILE})`,
      `UPSTREAM_BASE_URL: unknown key (in ${FILE}), did you mean upstream.baseUrl?`,
      `upstream.baseUrl: unknown key (in ${FILE}), did you mean upstream.baseUrl written nested (upstream: { baseUrl: ... })?`,
    ]);
  });

  it('a root or section that is not a mapping is one problem naming the file', async () => {
    expect((await layer('- a\n- b\n')).problems).toEqual([
      `--config ${FILE}: must be a YAML mapping with sections ${SECTIONS.join(', ')}`,
    ]);
    expect((await layer('upstream: [1, 2]\n')).problems).toEqual([
      `upstream (in ${FILE}): must be a mapping of keys, e.g. upstream.<key>: value`,
    ]);
  });

  it('never reads a prototype property as a known key', async () => {
    const { values, problems } = await layer('upstream:\n  toString: x\ntoString: y\n');
    expect(values).toEqual({});
    expect(problems).toEqual([
      `upstream.toString: unknown key (in ${FILE})`,
      `toString: unknown key (in ${FILE})`,
    ]);
  });

  it('a file it cannot read or parse is a problem naming the file', async () => {
    const problems: string[] = [];
    const missing = Object.assign(new Error('no'), { code: 'ENOENT' });
    await readYamlLayer(FILE, () => Promise.reject(missing), problems);
    expect(problems).toEqual([`--config ${FILE}: cannot read configuration file (no such file)`]);
    expect((await layer('a: [')).problems).toEqual([
      expect.stringMatching(new RegExp(`^--config ${FILE}: invalid YAML at line 1, column \\d+`)),
    ]);
  });

  it('knows the older name of store.url', () => {
    expect(aliasOf('store.url')).toEqual({ key: 'token.store.url', env: 'TOKEN_STORE_URL' });
    expect(aliasOf('upstream.baseUrl')).toBeUndefined();
  });
});
