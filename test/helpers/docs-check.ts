/**
 * Pure checks behind test/docs.test.ts: Markdown headings and links, the configuration tables of
 * docs/configuration.md, alert rules, and citations in source comments. Each takes text (and an
 * `exists` probe for paths), returns data or a list of problems, and touches no file itself.
 */
import { posix } from 'node:path';
import { parseAllDocuments } from 'yaml';

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
export function githubSlug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** Lines outside fenced code blocks, with their 1-based numbers. */
function proseLines(markdown: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fence: string | undefined;
  markdown.split('\n').forEach((text, index) => {
    const marker = /^\s*(```|~~~)/.exec(text)?.[1];
    if (marker !== undefined && (fence === undefined || fence === marker)) {
      fence = fence === undefined ? marker : undefined;
      return;
    }
    if (fence === undefined) out.push({ line: index + 1, text });
  });
  return out;
}

/** Headings of a Markdown file: their text and anchor (repeats get -1, -2 as on GitHub). */
export function headings(markdown: string): { text: string; slug: string }[] {
  const seen = new Map<string, number>();
  const out: { text: string; slug: string }[] = [];
  for (const { text } of proseLines(markdown)) {
    const match = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (match === null) continue;
    const title = (match[1] ?? '').replace(/`/g, '');
    const base = githubSlug(title);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    out.push({ text: title, slug: count === 0 ? base : `${base}-${count}` });
  }
  return out;
}

/** Link targets of a Markdown file (inline links and reference definitions), code excluded. */
export function links(markdown: string): { line: number; target: string }[] {
  const out: { line: number; target: string }[] = [];
  for (const { line, text } of proseLines(markdown)) {
    if (/^ {4,}\S/.test(text) && !/^\s*[-*\d]/.test(text.trimStart())) continue; // indented code
    const prose = text.replace(/`[^`]*`/g, '');
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ line, target: match[1] ?? '' });
    }
    const definition = /^\s*\[[^\]]+\]:\s*(\S+)/.exec(prose);
    if (definition !== null) out.push({ line, target: definition[1] ?? '' });
  }
  return out;
}

export interface RepoView {
  /** Whether a repository-relative path (file or directory) exists. */
  exists(path: string): boolean;
  /** Text of a repository-relative Markdown file, or undefined when there is none. */
  read(path: string): string | undefined;
  /** Whether some file of the repository has this name (a bare `README.md` in a comment). */
  hasFileNamed(name: string): boolean;
}

/** Resolve `target` against the directory of `from`; undefined when it leaves the repository. */
function resolveFrom(from: string, target: string): string | undefined {
  const joined = posix.normalize(posix.join(posix.dirname(from), target));
  return joined.startsWith('../') || joined === '..' || posix.isAbsolute(joined)
    ? undefined
    : joined.replace(/\/$/, '');
}

/** Every relative link of `file` that does not resolve to a file, directory or heading anchor. */
export function brokenLinks(file: string, markdown: string, repo: RepoView): string[] {
  const problems: string[] = [];
  for (const { line, target } of links(markdown)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: ...
    const hash = target.indexOf('#');
    const pathPart = decodeURI(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? undefined : target.slice(hash + 1);
    const where = `${file}:${line}: ${target}`;
    if (pathPart.startsWith('/')) {
      problems.push(`${where}: absolute path (use a path relative to ${file})`);
      continue;
    }
    const resolved = pathPart === '' ? file : resolveFrom(file, pathPart);
    if (resolved === undefined) {
      problems.push(`${where}: points outside the repository`);
      continue;
    }
    if (!repo.exists(resolved)) {
      problems.push(`${where}: ${resolved} does not exist`);
      continue;
    }
    if (anchor !== undefined && anchor !== '') {
      const text = resolved.endsWith('.md') ? repo.read(resolved) : undefined;
      if (text === undefined) {
        problems.push(`${where}: an anchor into a file that is not Markdown`);
      } else if (!headings(text).some((h) => h.slug === anchor)) {
        problems.push(`${where}: ${resolved} has no heading with anchor #${anchor}`);
      }
    }
  }
  return problems;
}

/** One row of a configuration table: `| \`ENV\` | \`yaml.key\` | default | ... |`. */
export interface ConfigRow {
  env: string;
  key: string;
  defaultCell: string;
  line: number;
}

export function configRows(markdown: string): ConfigRow[] {
  const rows: ConfigRow[] = [];
  for (const { line, text } of proseLines(markdown)) {
    const match = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*`([a-z][A-Za-z0-9.]*)`\s*\|([^|]*)\|/.exec(
      text,
    );
    if (match === null) continue;
    rows.push({
      env: match[1] ?? '',
      key: match[2] ?? '',
      defaultCell: (match[3] ?? '').trim(),
      line,
    });
  }
  return rows;
}

/**
 * How a built-in default is written in the default column, or undefined for "no value" (no
 * default, or an empty list), which the column states in words (`none`, `required`, ...).
 */
export function formatDefault(value: unknown): string | undefined {
  if (value === undefined || (Array.isArray(value) && value.length === 0)) return undefined;
  if (Array.isArray(value)) return value.map((item) => formatDefault(item)).join(',');
  if (typeof value === 'object' && value !== null && 'host' in value && 'port' in value) {
    const { host, port } = value as { host: string; port: number };
    return `${host.includes(':') ? `[${host}]` : host}:${port}`;
  }
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : JSON.stringify(value);
}

/** Problems of one row's default cell against the schema's default. */
export function defaultProblem(row: ConfigRow, schemaDefault: unknown): string | undefined {
  const expected = formatDefault(schemaDefault);
  const where = `docs/configuration.md:${row.line} ${row.key}`;
  if (expected === undefined) {
    return row.defaultCell.startsWith('`')
      ? `${where}: the schema has no default, but the doc gives ${row.defaultCell}`
      : undefined;
  }
  return row.defaultCell.startsWith(`\`${expected}\``)
    ? undefined
    : `${where}: default column must start with \`${expected}\` (the schema's default), not ${JSON.stringify(row.defaultCell)}`;
}

export interface AlertRule {
  alert: string;
  annotations: Record<string, string>;
}

/** Alerting rules of a YAML file: a PrometheusRule's `spec.groups` or a plain rule file's `groups`. */
export function alertRules(yamlText: string): AlertRule[] {
  const out: AlertRule[] = [];
  for (const doc of parseAllDocuments(yamlText)) {
    const value = doc.toJS() as {
      kind?: string;
      spec?: { groups?: unknown };
      groups?: unknown;
    } | null;
    if (value === null || typeof value !== 'object') continue;
    const groups = value.kind === 'PrometheusRule' ? value.spec?.groups : value.groups;
    if (!Array.isArray(groups)) continue;
    for (const group of groups as { rules?: unknown }[]) {
      for (const rule of (Array.isArray(group.rules) ? group.rules : []) as Record<
        string,
        unknown
      >[]) {
        if (typeof rule.alert !== 'string') continue;
        out.push({
          alert: rule.alert,
          annotations: (rule.annotations ?? {}) as Record<string, string>,
        });
      }
    }
  }
  return out;
}

/** Problems of every alert against docs/runbook.md: a section each, and a runbook_url into it. */
export function runbookProblems(rules: AlertRule[], runbook: string): string[] {
  const sections = headings(runbook);
  const problems: string[] = [];
  for (const { alert, annotations } of rules) {
    const section = sections.find((h) => h.text === alert);
    if (section === undefined) {
      problems.push(`${alert}: docs/runbook.md has no section "## ${alert}"`);
      continue;
    }
    const url = annotations.runbook_url;
    const anchor = /(?:^|\/)docs\/runbook\.md#([^#\s]+)$/.exec(url ?? '')?.[1];
    if (url === undefined) {
      problems.push(`${alert}: no runbook_url annotation (want …/docs/runbook.md#${section.slug})`);
    } else if (anchor !== section.slug) {
      problems.push(`${alert}: runbook_url ${url} must end in docs/runbook.md#${section.slug}`);
    }
  }
  return problems;
}

const CODE_EXTENSIONS = /\.(?:[cm]?[jt]s|tsx)$/;
const HASH_COMMENTS =
  /(?:\.(?:sh|ya?ml|conf|toml)|(?:^|\/)Dockerfile|(?:^|\/)\.[\w-]+ignore|\.ci\/run)$/;

/** The comment parts of a source file, by line. Markdown files are all prose. */
export function comments(path: string, text: string): { line: number; text: string }[] {
  const lines = text.split('\n');
  if (path.endsWith('.md')) return lines.map((t, i) => ({ line: i + 1, text: t }));
  const out: { line: number; text: string }[] = [];
  if (CODE_EXTENSIONS.test(path)) {
    let inBlock = false;
    lines.forEach((line, index) => {
      let rest = line;
      let comment = '';
      while (rest !== '') {
        if (inBlock) {
          const end = rest.indexOf('*/');
          comment += end < 0 ? rest : rest.slice(0, end);
          if (end < 0) rest = '';
          else {
            inBlock = false;
            rest = rest.slice(end + 2);
          }
          continue;
        }
        const start = /(^|[^:\w'"`\\*])(\/\/|\/\*)/.exec(rest);
        if (start === null) break;
        const at = start.index + (start[1] ?? '').length;
        if (start[2] === '//') {
          comment += rest.slice(at + 2);
          rest = '';
        } else {
          inBlock = true;
          rest = rest.slice(at + 2);
        }
      }
      if (comment.trim() !== '') out.push({ line: index + 1, text: comment });
    });
  } else if (HASH_COMMENTS.test(path)) {
    lines.forEach((line, index) => {
      const match = /(?:^|\s)#(?!!)(.*)$/.exec(line);
      if (match !== null) out.push({ line: index + 1, text: match[1] ?? '' });
    });
  }
  return out;
}

/** Phrases that cite the API description or notes kept outside the repository. */
const OUTSIDE = [
  /\.\.\/shared\//,
  /(?:^|[\s(])\/work\//,
  /\bshared\/(?:perf|spec|notes)\//,
  /\bspec(?:\/| §| \d)/,
  /\bspec format\b/,
  /\bthe spec\b/,
  /\(spec\b/,
];

/** A heading of `markdown` whose text is `section` (case-insensitive) or starts with `§n `. */
function hasSection(markdown: string, section: string): boolean {
  const wanted = section.toLowerCase();
  return headings(markdown).some((h) => {
    const text = h.text.toLowerCase();
    return text === wanted || (wanted.startsWith('§') && text.startsWith(`${wanted} `));
  });
}

/**
 * Citations in one file's comments that point outside the repository: Markdown files that do not
 * exist (resolved against the file's directory, the repository root and docs/), quoted sections
 * or `§` numbers those files do not have, and phrases that cite the API description elsewhere.
 * In Markdown files (all prose) only the phrases are checked; their links go to brokenLinks.
 */
export function outsideCitations(path: string, text: string, repo: RepoView): string[] {
  const problems: string[] = [];
  const prose = path.endsWith('.md');
  for (const comment of comments(path, text)) {
    const where = `${path}:${comment.line}`;
    const withoutUrls = comment.text
      .replace(/[a-z]+:\/\/\S+/gi, '')
      .replace(/\bREADME(?=\s+")/g, 'README.md'); // a bare README before a quoted heading
    for (const pattern of OUTSIDE) {
      const hit = pattern.exec(withoutUrls);
      if (hit !== null)
        problems.push(`${where}: "${hit[0]}" cites something outside the repository`);
    }
    if (prose) continue; // Markdown links are checked by brokenLinks
    const cites = /(\/?(?:[\w.-]+\/)*[\w.-]*\w\.md)\b(?:\s+("[^"]+"|§[\d.]*\d))?/g;
    for (const match of withoutUrls.matchAll(cites)) {
      const cited = match[1] ?? '';
      const candidates = cited.startsWith('/')
        ? []
        : [
            resolveFrom(path, cited),
            posix.normalize(cited),
            posix.normalize(posix.join('docs', cited)),
          ];
      const found = candidates.find(
        (candidate): candidate is string => candidate !== undefined && repo.exists(candidate),
      );
      if (found === undefined && !(cited.includes('/') ? false : repo.hasFileNamed(cited))) {
        problems.push(`${where}: cites ${cited}, which is not in the repository`);
        continue;
      }
      const section = match[2]?.replace(/^"|"$/g, '');
      const markdown = section === undefined || found === undefined ? undefined : repo.read(found);
      if (section !== undefined && markdown !== undefined && !hasSection(markdown, section)) {
        problems.push(`${where}: ${found} has no section ${match[2]}`);
      }
    }
  }
  return problems;
}
