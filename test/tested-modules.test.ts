/**
 * Every module of src/ that holds logic (anything beyond types) is imported directly by a test
 * file: a module no test imports is one whose behaviour nobody checks on its own, only through
 * whatever happens to call it. Type-only modules are exempt; every other module without a test
 * fails here, with no list of exceptions.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'node_modules' ? [] : walk(path);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** True when `text` declares or runs anything that is not a type. */
export function holdsLogic(text: string): boolean {
  const file = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, false);
  return file.statements.some((statement) => {
    if (ts.isImportDeclaration(statement)) return false;
    if (ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement)) return false;
    if (ts.isExportDeclaration(statement)) {
      // `export type { A }` and `export type * from` are types; `export { a } from` re-exports values.
      return !statement.isTypeOnly;
    }
    if (ts.isModuleDeclaration(statement)) return false; // `declare module`
    return true;
  });
}

/** Each file's relative imports (static, dynamic, type-only), resolved to absolute .ts paths. */
function importsOf(file: string): string[] {
  return ts
    .preProcessFile(readFileSync(file, 'utf8'), true, true)
    .importedFiles.map((ref) => ref.fileName)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
}

describe('tested modules', () => {
  it('tells a module of types from one with logic', () => {
    expect(holdsLogic("import type { A } from './a.js';\nexport interface B { a: A }")).toBe(false);
    expect(holdsLogic('export type C = string;\nexport type { D } from "./d.js";')).toBe(false);
    expect(holdsLogic('export const e = 1;')).toBe(true);
    expect(holdsLogic('export function f() {}')).toBe(true);
    expect(holdsLogic("export { g } from './g.js';")).toBe(true);
  });

  it('every src module holding logic is imported directly by a test file', () => {
    const sources = walk(join(ROOT, 'src'));
    const modules = sources.filter(
      (f) => !f.endsWith('.test.ts') && holdsLogic(readFileSync(f, 'utf8')),
    );
    const tests = [...sources, ...walk(join(ROOT, 'test'))].filter((f) => f.endsWith('.test.ts'));
    const imported = new Set(tests.flatMap(importsOf));
    const untested = modules
      .filter((m) => !imported.has(m) && !imported.has(m.replace(/\/index\.ts$/, '')))
      .map((m) => relative(ROOT, m))
      .sort();
    expect(untested).toEqual([]);
  });
});
