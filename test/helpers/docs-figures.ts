/**
 * Checks that keep the docs a reference and measured figures out of code: a figure quoted in a
 * source comment goes stale when the code or the runtime changes, so the comment links to the
 * docs section that holds it (docs/benchmarks.md); a dated run or an issue number in a reference
 * page, or an issue number in a test title, is history, which git keeps. Pure: text in, problems
 * out.
 */
import { comments } from './docs-check.js';

/**
 * Measured figures as comments quote them: a share of the CPU or of profile samples, µs, ms of CPU
 * per request, MiB of RSS, a speed ratio. Each needs its unit or its "of the CPU" context, so a
 * limit (`64 KiB`, `10% of that`) or code (`n % 50`) is not one.
 */
const MEASURED: readonly RegExp[] = [
  /\b\d+(?:\.\d+)?(?:\s?[–-]\s?\d+(?:\.\d+)?)?\s?%\s+(?:of\s+(?:the\s+|its\s+|all\s+)?(?:CPU|busy|samples|throughput)\b|(?:more|less)\s+(?:CPU|throughput)\b)/i,
  /\b\d+(?:\.\d+)?\s?[µμ]s\b/,
  /\b\d+(?:\.\d+)?\s?ms\s+(?:of\s+CPU\s+)?per\s+request\b/i,
  /\b\d+(?:\.\d+)?\s?MiB\s+(?:of\s+(?:idle\s+)?RSS\b|(?:less|more)\s+(?:idle\s+)?RSS\b)/i,
  /\b\d+(?:\.\d+)?\s?×\s+(?:the\s+)?(?:CPU|throughput)\b/i,
  /\b(?:\d+(?:\.\d+)?|several|many)\s+times\s+(?:faster|slower|cheaper|dearer)\b/i,
];

/**
 * Measured figures quoted in the comments of one source file, as `path:line: "figure"`. A comment
 * running over several lines is read as one text, so a figure broken across lines is found.
 */
export function measuredFigures(path: string, text: string): string[] {
  const runs: { text: string; lines: { offset: number; line: number }[] }[] = [];
  let previous = Number.NaN;
  for (const { line, text: raw } of comments(path, text)) {
    const part = raw.replace(/^\s*\*?\s*/, '').trimEnd();
    let run = runs.at(-1);
    if (run === undefined || line !== previous + 1) {
      run = { text: '', lines: [] };
      runs.push(run);
    }
    run.lines.push({ offset: run.text.length, line });
    run.text += `${part} `;
    previous = line;
  }
  const problems: string[] = [];
  for (const run of runs) {
    for (const pattern of MEASURED) {
      const hit = pattern.exec(run.text);
      if (hit === null) continue;
      const line = run.lines.findLast((l) => l.offset <= hit.index)?.line ?? 0;
      problems.push(`${path}:${line}: "${hit[0]}" (link to the docs section that holds it)`);
    }
  }
  return problems;
}

/** History in a reference page: a dated run, a numbered pass, an issue number, a history word. */
const HISTORY: readonly RegExp[] = [
  /\b20\d\d-\d\d-\d\d\b/,
  /\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)\s+pass\b/i,
  /\bissues?\s+#?\d+\b|(?:^|[\s(])#\d+\b/i,
  /\b(?:no longer|used to|was the first choice)\b/i,
];

/** Lines of a reference page that narrate history, as `path:line: "phrase"`. */
export function historyInDoc(path: string, markdown: string): string[] {
  return markdown.split('\n').flatMap((text, index) =>
    HISTORY.flatMap((pattern) => {
      const hit = pattern.exec(text);
      return hit === null ? [] : [`${path}:${index + 1}: "${hit[0].trim()}"`];
    }),
  );
}

/** A test's title: the string literal right after `it(`, `test(`, `describe(` (and `.each`...). */
const TITLE =
  /\b(?:it|test|describe)(?:\.\w+)*(?:\([^()]*\))?\(\s*(['"`])((?:\\.|(?!\1)[^\\])*)\1/g;

/** Test titles that carry an issue number or a "(was: …)", as `path:line: title`. */
export function historyInTitles(path: string, source: string): string[] {
  const problems: string[] = [];
  for (const match of source.matchAll(TITLE)) {
    const title = match[2] ?? '';
    if (/\bissues?\s+#?\d+\b|(?:^|[\s(])#\d+\b|\(was\b|\bwas:/i.test(title)) {
      const line = source.slice(0, match.index).split('\n').length;
      problems.push(`${path}:${line}: ${title}`);
    }
  }
  return problems;
}
