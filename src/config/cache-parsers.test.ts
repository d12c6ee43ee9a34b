import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { cacheRules } from './cache-parsers.js';
import { loadConfig } from './load.js';
import { parseValue } from './parsers.js';

const parse = (raw: unknown): ReturnType<typeof parseValue> => parseValue(cacheRules(), raw);

describe('cache.rules', () => {
  it('reads env PREFIX=SECONDS lists and YAML lists of mappings or strings', () => {
    expect(parse('/v1.0/contracts/=300, /v1.0/prices/ = 60')).toEqual({
      ok: true,
      value: [
        { prefix: '/v1.0/contracts/', ttlSeconds: 300 },
        { prefix: '/v1.0/prices/', ttlSeconds: 60 },
      ],
    });
    expect(parse([{ prefix: '/a/', ttlSeconds: 1 }, '/b/=86400'])).toEqual({
      ok: true,
      value: [
        { prefix: '/a/', ttlSeconds: 1 },
        { prefix: '/b/', ttlSeconds: 86_400 },
      ],
    });
    // The last "=" splits: a prefix may hold one.
    expect(parse('/q=x/=5')).toEqual({ ok: true, value: [{ prefix: '/q=x/', ttlSeconds: 5 }] });
    expect(parse([])).toEqual({ ok: true, value: [] });
  });

  it('reports every bad rule, each naming its position and what it got', () => {
    const result = parse('garbage,/ok/=10,nope/=5,/a/../=5,/b/=0,/c/=86401,/d/=soon');
    expect(result).toEqual({
      ok: false,
      problems: [
        'rule 1: must be PREFIX=SECONDS, e.g. /v1.0/contracts/=300 (got "garbage": no "=")',
        'rule 3: the prefix must start with "/" and hold no whitespace, "?", "#", "\\" or "%" (got "nope/")',
        'rule 4: the prefix must not contain "." or ".." segments (got "/a/../")',
        'rule 5: the TTL must be a whole number of seconds from 1 to 86400 (got "0"), e.g. /v1.0/contracts/=300',
        'rule 6: the TTL must be a whole number of seconds from 1 to 86400 (got "86401"), e.g. /v1.0/contracts/=300',
        'rule 7: the TTL must be a whole number of seconds from 1 to 86400 (got "soon"), e.g. /v1.0/contracts/=300',
      ],
    });
  });

  it('reports a bad prefix and a bad TTL of one rule both', () => {
    const result = parse([{ prefix: '/a b/', ttlSeconds: 1.5 }]);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.problems).toHaveLength(2);
  });

  it('refuses YAML rules with other keys, no TTL, or of another type', () => {
    expect(parse([{ prefix: '/a/', ttlSeconds: 5, ttl: 9 }])).toEqual({
      ok: false,
      problems: ['rule 1: has only prefix and ttlSeconds (unknown: ttl)'],
    });
    expect(parse([{ prefix: '/a/' }])).toMatchObject({
      problems: [expect.stringContaining('(got no ttlSeconds)')],
    });
    expect(parse(['/a/=1', 42])).toEqual({
      ok: false,
      problems: ['rule 2: must be PREFIX=SECONDS or a mapping {prefix, ttlSeconds}'],
    });
    expect(parse({ prefix: '/a/' })).toEqual({
      ok: false,
      problems: ['must be PREFIX=SECONDS,... or a YAML list of {prefix, ttlSeconds}'],
    });
  });

  it('a problem line names the setting', async () => {
    const error = await loadConfig({
      env: {
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID: 'id',
        CLIENT_SECRET: 'secret',
        CACHE_RULES: '/v1.0/=0',
      },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toContainEqual(
      expect.stringMatching(/^CACHE_RULES \(cache\.rules\): rule 1: the TTL must be/),
    );
  });
});
