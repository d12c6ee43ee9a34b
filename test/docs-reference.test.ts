/**
 * The docs read as a reference: docs/benchmarks.md and docs/design.md stay within their sizes and
 * carry no dated runs, numbered passes or issue numbers; no source comment quotes a measured
 * figure (it links to the docs section instead); no test title carries an issue number or a
 * "(was: …)". The checks are shown to fail on small fixtures first.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { historyInDoc, historyInTitles, measuredFigures } from './helpers/docs-figures.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const LIMITS = { 'docs/benchmarks.md': 24 * 1024, 'docs/design.md': 30 * 1024 } as const;

/** TypeScript files under `dir`, repository-relative. */
function sources(dir: string): string[] {
  const full = join(ROOT, dir);
  if (!existsSync(full)) return [];
  return readdirSync(full, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)).split('\\').join('/'));
}

const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

describe('the checks themselves', () => {
  it('find measured figures in comments, across lines, and nothing in code or limits', () => {
    const source = [
      '/**',
      ' * Skips the stream life cycle (about 4 % of',
      ' * the CPU per request, docs/benchmarks.md "Hot path").',
      ' */',
      'const FIFTY_PERCENT = count % 50; // 10% of that, at most 64 KiB, 14–50 ms of blocked loop',
      '// one write: 2.8 µs in isolation',
      '// the package index: ~13 MiB of idle RSS',
      '// several times faster than node',
      "const label = '3 % of the CPU'; // a string in code is not a comment",
    ].join('\n');
    const problems = measuredFigures('src/x.ts', source);
    expect(problems).toEqual([
      'src/x.ts:2: "4 % of the CPU" (link to the docs section that holds it)',
      'src/x.ts:6: "2.8 µs" (link to the docs section that holds it)',
      'src/x.ts:7: "13 MiB of idle RSS" (link to the docs section that holds it)',
      'src/x.ts:8: "several times faster" (link to the docs section that holds it)',
    ]);
  });

  it('find dated runs, passes and issue numbers in a page, and issue numbers in titles', () => {
    const page = [
      '## Figures of record',
      'Measured 2026-11-23 in the seventh pass (issue 8), see #25.',
      'The queue no longer allocates. 2 KB answers, 50 % of the rounds.',
    ].join('\n');
    expect(historyInDoc('docs/b.md', page)).toEqual([
      'docs/b.md:2: "2026-11-23"',
      'docs/b.md:2: "seventh pass"',
      'docs/b.md:2: "issue 8"',
      'docs/b.md:3: "no longer"',
    ]);
    const tests = [
      "it('ends the forward at once (issue 22)', () => {});",
      "it.each([1])('(a) 503 (was: an hour away) %i', () => {});",
      "describe('limits', () => { it('keeps 100 % of the answer', () => {}); });",
    ].join('\n');
    expect(historyInTitles('test/t.test.ts', tests)).toEqual([
      'test/t.test.ts:1: ends the forward at once (issue 22)',
      'test/t.test.ts:2: (a) 503 (was: an hour away) %i',
    ]);
  });
});

describe('the repository', () => {
  for (const [path, limit] of Object.entries(LIMITS)) {
    it(`${path} is at most ${limit / 1024} KB, with no dated runs, passes or issue numbers`, () => {
      expect(statSync(join(ROOT, path)).size).toBeLessThanOrEqual(limit);
      const problems = historyInDoc(path, read(path));
      expect(problems, problems.join('\n')).toEqual([]);
    });
  }

  it('no source comment quotes a measured figure (it links to docs/benchmarks.md)', () => {
    const problems = sources('src').flatMap((path) => measuredFigures(path, read(path)));
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('no test title carries an issue number or a "(was: …)"', () => {
    const files = [...sources('src'), ...sources('test')].filter(
      (path) => path.endsWith('.test.ts') && path !== 'test/docs-reference.test.ts', // its fixtures
    );
    const problems = files.flatMap((path) => historyInTitles(path, read(path)));
    expect(problems, problems.join('\n')).toEqual([]);
  });
});
