/**
 * The YAML parser behind `--config`, in a module of its own so that `load.ts` imports it lazily
 * (RSS a sidecar without a file never needs: docs/benchmarks.md "Footprint"). It
 * imports `yaml` statically: the bundler wraps a static import of a CommonJS package so its named
 * exports work; a dynamic `import('yaml')` in the bundle yields only `default`.
 */
import { LineCounter, parseDocument } from 'yaml';

export type YamlResult = { ok: true; value: unknown } | { ok: false; problem: string };

/**
 * Parse one YAML document; a syntax error is a one-line problem naming its line and column, and
 * too many aliases (the parser's limit) a one-line problem too.
 */
export function parseYaml(text: string): YamlResult {
  const lineCounter = new LineCounter();
  // prettyErrors is off: a pretty message carries a source excerpt, which may hold a secret.
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter });
  const [firstError] = doc.errors;
  if (firstError !== undefined) {
    const reason = (firstError.message.split('\n')[0] ?? '').replace(/:\s*$/, '');
    const where = lineCounter.linePos(firstError.pos[0]);
    return {
      ok: false,
      problem: `invalid YAML at line ${where.line}, column ${where.col}: ${reason}`,
    };
  }
  try {
    // The parser's own alias limit (maxAliasCount) throws here: a "billion laughs" file is a
    // configuration problem like any other, not a crash with a stack.
    return { ok: true, value: doc.toJS() };
  } catch (error) {
    const reason = error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
    return { ok: false, problem: `invalid YAML: ${reason}` };
  }
}
