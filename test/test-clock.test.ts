/**
 * Tests check behaviour, not the clock (docs/testing.md "Time in tests"): no test reads how long
 * something took on the real clock, and no test sleeps on it, except through the helpers of
 * test/helpers/wait.ts, whose `realClock(reason)` marker names every real wait and stopwatch; each
 * reason is listed in docs/testing.md. Files that install vitest's fake timers may build timer promises:
 * those are the fake clock's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const HELPER = 'test/helpers/wait.ts';

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : files(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** Every test file and test helper. */
const TEST_FILES = [...files('src'), ...files('test')].filter(
  (path) => path.endsWith('.test.ts') || path.startsWith('test/'),
);

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/** `file:line: text` of each line matching `pattern` in the files `which` keeps. */
function offenders(pattern: RegExp, which: (path: string, text: string) => boolean): string[] {
  return TEST_FILES.filter((path) => path !== HELPER && which(path, read(path))).flatMap((path) =>
    read(path)
      .split('\n')
      .flatMap((line, i) => (pattern.test(line) ? [`${path}:${i + 1}: ${line.trim()}`] : [])),
  );
}

const everyFile = () => true;
const realTimers = (_path: string, text: string) => !text.includes('vi.useFakeTimers(');

describe('time in tests', () => {
  it('no assertion on an elapsed real time', () => {
    expect(offenders(/expect\(\s*(Date|performance)\.now\(\)\s*-/, realTimers)).toEqual([]);
    expect(offenders(/performance\.now\(\)\s*-/, everyFile)).toEqual([]);
  });

  it('elapsed real time read only through realClock(reason).stopwatch(), or to pace a sleep', () => {
    const elapsed = /(Date|performance)\.now\(\)\s*-\s*[A-Za-z_(]/;
    const pacing = /\.sleep\(/;
    expect(
      offenders(elapsed, realTimers).filter((line) => !pacing.test(line.slice(line.indexOf(': ')))),
    ).toEqual([]);
  });

  it('no bare sleep on the real clock: waitFor or realClock(reason) from test/helpers/wait.ts', () => {
    const sleep =
      /new Promise(<[^>]*>)?\(\s*\(?\s*\w+\s*\)?\s*=>\s*setTimeout\(|from 'node:timers\/promises'/;
    expect(offenders(sleep, realTimers)).toEqual([]);
  });

  it('one waitFor for the suite', () => {
    expect(offenders(/function (waitFor|until)\b/, everyFile)).toEqual([]);
  });

  it('every realClock(reason) is listed with its reason in docs/testing.md', () => {
    const docs = read('docs/testing.md').replace(/\s+/g, ' ');
    const reasons = TEST_FILES.filter((path) => path !== HELPER).flatMap((path) =>
      [...read(path).matchAll(/realClock\(\s*(['"])(.*?)\1/g)].map((m) => ({
        path: relative('.', path),
        reason: m[2]!.replace(/\\'/g, "'"),
      })),
    );
    expect(reasons.length).toBeGreaterThan(0);
    const missing = reasons.filter(({ reason }) => !docs.includes(reason));
    expect(missing).toEqual([]);
  });
});
