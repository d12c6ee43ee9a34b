import { describe, expect, it } from 'vitest';
import { loadConfig } from './load.js';
import { parseValue } from './parsers.js';
import {
  bypassesProxy,
  egressSummary,
  foldProxyVariables,
  noProxy,
  proxyFor,
  proxyUrl,
  shownProxy,
} from './egress.js';

const bypasses = (entries: string, url: string): boolean => {
  const parsed = parseValue(noProxy(), entries);
  if (!parsed.ok) throw new Error(parsed.problems.join('; '));
  return bypassesProxy(parsed.value, new URL(url));
};

describe('NO_PROXY as curl reads it', () => {
  it('matches a host, and a domain with or without its leading dot, with its subdomains', () => {
    expect(bypasses('api.example.com', 'https://api.example.com')).toBe(true);
    expect(bypasses('example.com', 'https://api.example.com')).toBe(true);
    expect(bypasses('.example.com', 'https://api.example.com')).toBe(true);
    expect(bypasses('.example.com', 'https://example.com')).toBe(true);
    expect(bypasses('example.com', 'https://badexample.com')).toBe(false);
    expect(bypasses('api.example.com', 'https://example.com')).toBe(false);
    expect(bypasses('EXAMPLE.com', 'https://Api.Example.COM')).toBe(true);
  });

  it('takes a comma (and space) separated list; * matches everything', () => {
    expect(bypasses('a.internal, svc.cluster.local ,b', 'https://x.svc.cluster.local')).toBe(true);
    expect(bypasses('a.internal b.internal', 'https://b.internal')).toBe(true);
    expect(bypasses('*', 'https://anything.example')).toBe(true);
    expect(bypasses('', 'https://anything.example')).toBe(false);
  });

  it('matches host:port only on that port (the scheme default when the URL names none)', () => {
    expect(bypasses('api.example.com:8443', 'https://api.example.com:8443')).toBe(true);
    expect(bypasses('api.example.com:8443', 'https://api.example.com')).toBe(false);
    expect(bypasses('api.example.com:443', 'https://api.example.com')).toBe(true);
  });

  it('matches IP literals (v4, v6 with or without brackets) and CIDR ranges, never by suffix', () => {
    expect(bypasses('127.0.0.1', 'https://127.0.0.1:8443')).toBe(true);
    expect(bypasses('0.0.1', 'https://127.0.0.1')).toBe(false);
    expect(bypasses('::1', 'https://[::1]:8443')).toBe(true);
    expect(bypasses('[::1]:8443', 'https://[::1]:8443')).toBe(true);
    expect(bypasses('[::1]:8443', 'https://[::1]:9443')).toBe(false);
    expect(bypasses('10.0.0.0/8', 'https://10.1.2.3')).toBe(true);
    expect(bypasses('10.0.0.0/8', 'https://11.1.2.3')).toBe(false);
    expect(bypasses('10.0.0.0/8', 'https://ten.example')).toBe(false);
  });

  it('reports every entry it cannot read', () => {
    const parsed = parseValue(noProxy(), 'good.example, bad/99, ::1, a..b');
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? [] : parsed.problems).toHaveLength(2);
  });
});

describe('the proxy URL', () => {
  const parse = (raw: string) => parseValue(proxyUrl(), raw);

  it('is http:// or https://, with the scheme default port; no scheme means http://', () => {
    expect(parse('http://proxy.corp:3128')).toEqual({ ok: true, value: 'http://proxy.corp:3128' });
    expect(parse('proxy.corp:3128')).toEqual({ ok: true, value: 'http://proxy.corp:3128' });
    expect(parse('https://proxy.corp')).toEqual({ ok: true, value: 'https://proxy.corp:443' });
    expect(parse('http://u%40corp:p%3Ass@proxy.corp:3128/')).toEqual({
      ok: true,
      value: 'http://u%40corp:p%3Ass@proxy.corp:3128',
    });
  });

  it('refuses other schemes, paths and non-URLs without repeating the value', () => {
    for (const raw of [
      'socks5://u:s3cret@p:1080',
      'http://u:s3cret@p:3128/x',
      'http://u:s3cret@:1',
    ]) {
      const result = parse(raw);
      expect(result.ok, raw).toBe(false);
      expect(JSON.stringify(result)).not.toContain('s3cret');
    }
  });

  it('is shown with its whole user-info masked: a user name alone may be an API key', () => {
    expect(shownProxy('http://user:s3cret@proxy.corp:3128')).toBe('http://***@proxy.corp:3128');
    expect(shownProxy('http://APIKEY@proxy.corp:3128')).toBe('http://***@proxy.corp:3128');
    expect(shownProxy('http://:s3cret@proxy.corp:3128')).toBe('http://***@proxy.corp:3128');
    expect(shownProxy('http://proxy.corp:3128')).toBe('http://proxy.corp:3128');
  });

  it('refuses a % in the user or password that undici could not decode, without repeating it', () => {
    for (const raw of [
      'http://u:50%zz@p:3128',
      'http://u:50%off@p:3128',
      'http://k%y@p:1',
      'http://u:%ff@p:1',
    ]) {
      const result = parse(raw);
      expect(result.ok, raw).toBe(false);
      expect(JSON.stringify(result)).toContain('write a literal % as %25');
      expect(JSON.stringify(result)).not.toContain('%zz');
      expect(JSON.stringify(result)).not.toContain('%off');
    }
    expect(parse('http://u:50%25off@p:3128').ok).toBe(true);
  });
});

describe('which origin goes through which proxy', () => {
  const egress = {
    proxy: 'http://proxy.corp:3128',
    httpProxy: 'http://plain.corp:3128',
    noProxy: ['.svc.cluster.local'],
  };

  it('https:// through HTTPS_PROXY, http:// through HTTP_PROXY, NO_PROXY direct', () => {
    expect(proxyFor(egress, 'https://api.example.com')).toBe('http://proxy.corp:3128');
    expect(proxyFor(egress, 'http://127.0.0.1:8080')).toBe('http://plain.corp:3128');
    expect(proxyFor(egress, 'https://auth.svc.cluster.local/oauth/token/')).toBeUndefined();
    expect(proxyFor({ ...egress, proxy: undefined }, 'https://api.example.com')).toBeUndefined();
    expect(
      egressSummary(egress, 'https://api.example.com', 'https://a.svc.cluster.local/t'),
    ).toEqual({
      proxy: 'http://proxy.corp:3128',
      httpProxy: 'http://plain.corp:3128',
      noProxy: ['.svc.cluster.local'],
      api: 'through http://proxy.corp:3128',
      tokenEndpoint: 'direct',
    });
    expect(egressSummary({ ...egress, proxy: undefined, httpProxy: undefined }, 'a', 'b')).toBe(
      undefined,
    );
  });

  it('folds the lower-case variables in; the upper-case ones win', () => {
    expect(foldProxyVariables({ https_proxy: 'a', no_proxy: 'b', http_proxy: 'c' })).toMatchObject({
      HTTPS_PROXY: 'a',
      NO_PROXY: 'b',
      HTTP_PROXY: 'c',
    });
    expect(foldProxyVariables({ https_proxy: 'a', HTTPS_PROXY: 'A' }).HTTPS_PROXY).toBe('A');
  });
});

describe('loading the egress settings', () => {
  const base = {
    UPSTREAM_BASE_URL: 'https://api.example.com',
    CLIENT_ID: 'id',
    CLIENT_SECRET: 'secret',
  };

  it('reads the variables and keeps the password out of the serialised configuration', async () => {
    const config = await loadConfig({
      env: { ...base, https_proxy: 'http://u:pw-Secret@proxy.corp:3128', NO_PROXY: '.corp' },
    });
    expect(config.egress.proxy).toBe('http://u:pw-Secret@proxy.corp:3128');
    expect(config.egress.noProxy).toEqual(['.corp']);
    expect(JSON.stringify(config)).not.toContain('pw-Secret');
    expect(JSON.stringify(config)).toContain('http://***@proxy.corp:3128');
  });

  it('reads egress.proxy and egress.noProxy from the YAML file', async () => {
    const yaml = 'egress:\n  proxy: http://proxy.corp:3128\n  noProxy: [a.corp, 10.0.0.0/8]\n';
    const config = await loadConfig({
      env: base,
      configFile: 'sidecar.yaml',
      readFile: () => Promise.resolve(yaml),
    });
    expect(config.egress).toMatchObject({
      proxy: 'http://proxy.corp:3128',
      noProxy: ['a.corp', '10.0.0.0/8'],
    });
  });

  it('lists an invalid proxy URL with every other problem, never echoing it', async () => {
    const failure = await loadConfig({
      env: {
        ...base,
        HTTPS_PROXY: 'ftp://u:pw-Secret@p:21',
        NO_PROXY: 'x/1',
        UPSTREAM_TIMEOUT_MS: 'x',
      },
    }).then(
      () => ({ problems: [] as string[] }),
      (error: unknown) => error as { problems: string[] },
    );
    expect(failure.problems).toHaveLength(3);
    expect(failure.problems.join('\n')).toContain('HTTPS_PROXY (egress.proxy)');
    expect(failure.problems.join('\n')).not.toContain('pw-Secret');
    // NO_PROXY holds no secret: the entry is named, so the user finds it in a long list.
    expect(failure.problems.join('\n')).toContain('(got "x/1")');
  });
});
