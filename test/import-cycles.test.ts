/**
 * No import cycle anywhere in the repository's TypeScript (src/, test/, deploy/, scripts/, bench/),
 * type-only imports included: a circle of types still ties the modules' roles together
 * (docs/design.md "Module boundaries"). The checker is shown to find a cycle on a small graph
 * first, so the check itself can fail.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Folders never read: installed packages, build output, CI's work area. */
const SKIP = new Set(['node_modules', 'dist', 'coverage', '.git', '.ci']);

/** Every .ts/.mts file under `dir` but declaration files (tests included: they import too). */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      return SKIP.has(name) || name.startsWith('dist-') ? [] : sourceFiles(path);
    }
    return /\.m?ts$/.test(name) && !/\.d\.m?ts$/.test(name) ? [path] : [];
  });
}

/** Each file's relative imports (static, dynamic and type-only), resolved to .ts files in `files`. */
function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = info.importedFiles
      .map((ref) => ref.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => resolve(dirname(file), spec.replace(/\.js$/, '.ts').replace(/\.mjs$/, '.mts')))
      .map((path) => (known.has(path) ? path : join(path, 'index.ts')))
      .filter((path) => known.has(path));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Strongly connected components with more than one member, or a member importing itself. */
export function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next += 1;
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component);
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

describe('import cycles', () => {
  it('the checker finds a circle of three and ignores a chain', () => {
    const circle = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ]);
    expect(cycles(circle).map((c) => c.sort())).toEqual([['a', 'b', 'c']]);
    expect(
      cycles(
        new Map([
          ['x', ['y']],
          ['y', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('no module of the repository reaches itself through its imports, type-only imports included', () => {
    const files = sourceFiles(ROOT);
    expect(files.filter((f) => relative(ROOT, f).startsWith('deploy/')).length).toBeGreaterThan(0);
    const found = cycles(importGraph(files)).map((component) =>
      component.map((file) => relative(ROOT, file)).sort(),
    );
    expect(found, 'import cycles (docs/design.md "Module boundaries")').toEqual([]);
  });
});
