import { describe, expect, it } from 'vitest';
import { parseYaml } from './yaml.js';

describe('parseYaml', () => {
  it('turns one document into plain values', () => {
    expect(parseYaml('upstream:\n  baseUrl: https://api.example.com\n  timeoutMs: 500\n')).toEqual({
      ok: true,
      value: { upstream: { baseUrl: 'https://api.example.com', timeoutMs: 500 } },
    });
    expect(parseYaml('')).toEqual({ ok: true, value: null });
  });

  it('names the line and column of a syntax error, in one line and without the source text', () => {
    const secret = 'the-client-secret-0d1e';
    const result = parseYaml(`credentials:\n  clientSecret: "${secret}\n  clientId: x\n`);
    expect(result.ok).toBe(false);
    const problem = result.ok ? '' : result.problem;
    expect(problem).toMatch(/^invalid YAML at line \d+, column \d+: /);
    expect(problem).not.toContain('\n');
    expect(problem).not.toContain(secret);
  });

  it('refuses a key given twice, at its position', () => {
    expect(parseYaml('log:\n  level: info\n  level: debug\n')).toEqual({
      ok: false,
      problem: expect.stringMatching(/^invalid YAML at line 3, column 3: Map keys must be unique/),
    });
  });

  it('a "billion laughs" of aliases is a one-line problem, not a crash', () => {
    const rows = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 1; i < 9; i += 1) {
      const prev = String.fromCharCode(96 + i);
      const next = String.fromCharCode(97 + i);
      rows.push(`${next}: &${next} [${Array(9).fill(`*${prev}`).join(',')}]`);
    }
    const result = parseYaml(rows.join('\n'));
    expect(result).toEqual({
      ok: false,
      problem: expect.stringMatching(/^invalid YAML: .*alias/i),
    });
  });
});
