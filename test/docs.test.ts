/**
 * The docs stay true: every configuration key documented (and nothing else), with the schema's
 * default; every alert with a runbook section and a runbook_url into it; every relative link and
 * anchor resolving; no comment citing a file outside the repository; the README short. The
 * checks themselves are exercised on small fixtures first, so each one is shown to fail.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FIELDS } from '../src/config/schema.js';
import {
  alertRules,
  brokenLinks,
  configRows,
  defaultProblem,
  githubSlug,
  headings,
  outsideCitations,
  runbookProblems,
  type RepoView,
} from './helpers/docs-check.js';

/** Where the contract's sections live in the repository, for whoever fixes a citation. */
const CITATION_HINT = [
  'Cite the in-repo page instead:',
  '  DESIGN.md "Configuration" -> docs/configuration.md',
  '  DESIGN.md "Token keeper semantics" -> docs/design.md "Token keeper"',
  '  DESIGN.md "Proxy semantics" -> docs/design.md "Proxy" (error table: docs/reference.md "Error codes")',
  '  DESIGN.md "Bounded work" -> docs/design.md "Bounded work"',
  '  DESIGN.md "Shared token store" / "Quota guard" / "Response cache" -> docs/token-store.md / docs/quota-guard.md / docs/response-cache.md',
  '  DESIGN.md "Admin listener" / "Metrics" / "Logs" / "Command line" -> docs/reference.md "Admin endpoints" / "Metrics" / "Logs" / "Command line"',
  '  DESIGN.md "Source layout and boundaries" -> docs/design.md "Module boundaries"',
  '  STYLE.md N -> docs/design.md "Practices"; perf/ENGINE.md -> docs/engine-choice.md',
  '  spec/service-interface.md N.N, "spec §N" -> docs/api-notes.md §N.N',
].join('\n');

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const README_LIMIT = 8 * 1024;

const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

/** Files under `dir` (repository-relative), skipping generated and installed trees. */
function walk(dir: string): string[] {
  const full = join(ROOT, dir);
  if (!existsSync(full)) return [];
  return readdirSync(full, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      return ['node_modules', 'dist', 'work', '.git'].includes(entry.name) ? [] : walk(path);
    }
    return [relative(ROOT, join(ROOT, path)).split('\\').join('/')];
  });
}

const fileNames = new Set(
  ['.ci', 'bench', 'config', 'deploy', 'docs', 'scripts', 'src', 'test']
    .flatMap(walk)
    .map((path) => path.slice(path.lastIndexOf('/') + 1)),
);

const repo: RepoView = {
  hasFileNamed: (name) => fileNames.has(name),
  exists: (path) => existsSync(join(ROOT, path)),
  read: (path) => {
    const full = join(ROOT, path);
    return existsSync(full) && statSync(full).isFile() ? readFileSync(full, 'utf8') : undefined;
  },
};

/** A RepoView over an in-memory set of files, for the fixtures. */
function fakeRepo(files: Record<string, string>): RepoView {
  return {
    hasFileNamed: (name) => Object.keys(files).some((path) => path.endsWith(`/${name}`)),
    exists: (path) =>
      path in files || Object.keys(files).some((name) => name.startsWith(`${path}/`)),
    read: (path) => files[path],
  };
}

describe('the checks themselves', () => {
  it('slugs headings as GitHub does', () => {
    expect(githubSlug('OAuthSidecarNoValidToken')).toBe('oauthsidecarnovalidtoken');
    expect(githubSlug('§4.1 POST /oauth/token/')).toBe('41-post-oauthtoken');
    expect(githubSlug('Token store and Redis')).toBe('token-store-and-redis');
    expect(headings('# A\n```\n# not a heading\n```\n## A\n').map((h) => h.slug)).toEqual([
      'a',
      'a-1',
    ]);
  });

  it('finds a missing file, a missing anchor and a link out of the repository', () => {
    const files = { 'docs/a.md': '# Title\n## Present\n', 'docs/b.md': '' };
    const text = [
      '[ok](b.md) [ok](#present) [ok](a.md#title) [web](https://example.com/x.md)',
      '[gone](missing.md) [bad](#absent) [out](../../elsewhere.md) `[code](nope.md)`',
    ].join('\n');
    const problems = brokenLinks('docs/a.md', text, fakeRepo(files));
    expect(problems).toHaveLength(3);
    expect(problems.join('\n')).toMatch(/missing\.md does not exist/);
    expect(problems.join('\n')).toMatch(/no heading with anchor #absent/);
    expect(problems.join('\n')).toMatch(/outside the repository/);
  });

  it('reads configuration rows and compares defaults', () => {
    const rows = configRows(
      [
        '| env var | YAML key | default | meaning |',
        '| `A_B` | `a.b` | `30000` | x |',
        '| `A_C` | `a.c` | none | x |',
      ].join('\n'),
    );
    expect(rows.map((r) => [r.env, r.key])).toEqual([
      ['A_B', 'a.b'],
      ['A_C', 'a.c'],
    ]);
    const [first, second] = rows as [(typeof rows)[0], (typeof rows)[0]];
    expect(defaultProblem(first, 30_000)).toBeUndefined();
    expect(defaultProblem(first, 10_000)).toMatch(/must start with `10000`/);
    expect(defaultProblem(second, undefined)).toBeUndefined();
    expect(defaultProblem(second, [])).toBeUndefined();
    expect(defaultProblem(first, undefined)).toMatch(/no default/);
    expect(defaultProblem(second, { host: '127.0.0.1', port: 8080 })).toMatch(/127\.0\.0\.1:8080/);
  });

  it('wants a runbook section and a runbook_url pointing at it for every alert', () => {
    const rules = alertRules(
      [
        'kind: PrometheusRule',
        'spec:',
        '  groups:',
        '    - rules:',
        '        - alert: Good',
        '          annotations: { runbook_url: "https://x/docs/runbook.md#good" }',
        '        - alert: NoUrl',
        '        - alert: WrongAnchor',
        '          annotations: { runbook_url: "https://x/docs/runbook.md#good" }',
        '        - alert: NoSection',
        '        - record: not_an_alert',
      ].join('\n'),
    );
    expect(rules.map((r) => r.alert)).toEqual(['Good', 'NoUrl', 'WrongAnchor', 'NoSection']);
    const problems = runbookProblems(rules, '## Good\n## NoUrl\n## WrongAnchor\n');
    expect(problems).toEqual([
      expect.stringMatching(/^NoUrl: no runbook_url/),
      expect.stringMatching(
        /^WrongAnchor: runbook_url .* must end in docs\/runbook\.md#wronganchor/,
      ),
      expect.stringMatching(/^NoSection: docs\/runbook\.md has no section/),
    ]);
  });

  it('flags comments that cite files or the API description outside the repository', () => {
    const files = {
      'docs/design.md': '## Proxy\n',
      'docs/api-notes.md': '## §4.1 Token\n',
      'README.md': '# x\n## Try it\n',
    };
    const source = [
      '// fine: docs/design.md "Proxy", api-notes.md §4.1, https://example.com/README.md',
      "const url = 'https://host//path'; // and the fetch spec is someone else's",
      '/** forwarded with stream() (perf/ENGINE.md)',
      ' * as spec/service-interface.md 4.1 says (spec §9), see DESIGN.md "Proxy semantics" */',
      '// see docs/design.md "Nowhere" and docs/api-notes.md §7, ../shared/notes/x.md',
      '// measured by bench/, see README "Benchmarks"',
    ].join('\n');
    const problems = outsideCitations('src/x.ts', source, fakeRepo(files));
    const text = problems.join('\n');
    expect(text).toMatch(/src\/x\.ts:3: cites perf\/ENGINE\.md/);
    expect(text).toMatch(/src\/x\.ts:4: "spec\/"/);
    expect(text).toMatch(/src\/x\.ts:4: "\(spec"/);
    expect(text).toMatch(/src\/x\.ts:4: cites DESIGN\.md/);
    expect(text).toMatch(/src\/x\.ts:5: docs\/design\.md has no section "Nowhere"/);
    expect(text).toMatch(/src\/x\.ts:5: docs\/api-notes\.md has no section §7/);
    expect(text).toMatch(/src\/x\.ts:5: "\.\.\/shared\/"/);
    expect(text).toMatch(/src\/x\.ts:6: README\.md has no section "Benchmarks"/);
    expect(text).not.toMatch(/src\/x\.ts:[12]:/);
    expect(outsideCitations('deploy/x.sh', '# Recipe: /work/shared/notes/c.md\n', repo)).toEqual(
      expect.arrayContaining([expect.stringMatching(/deploy\/x\.sh:1: cites \/work\/shared/)]),
    );
  });
});

describe('the repository', () => {
  const docs = walk('docs').filter((path) => path.endsWith('.md'));
  const markdown = ['README.md', 'CHANGELOG.md', ...docs, ...walk('deploy')].filter((path) =>
    path.endsWith('.md'),
  );

  it(`README.md is at most ${README_LIMIT} bytes`, () => {
    expect(statSync(join(ROOT, 'README.md')).size).toBeLessThanOrEqual(README_LIMIT);
  });

  it('README.md shows the two commands a newcomer needs', () => {
    const readme = read('README.md');
    expect(readme).toContain('    npm ci && npm run demo\n');
    expect(readme).toContain('    npm test\n');
  });

  it("README.md's apt line and .ci/run install every Debian package a test's hint names", () => {
    // The packages the tests need are the ones their "not found" hints name (apt-get install …),
    // in test/ and in the bench/ modules test/ imports.
    const testFiles = walk('test').filter((path) => path.endsWith('.ts'));
    const imported = testFiles.flatMap((path) =>
      [...read(path).matchAll(/from '(?:\.\.\/)+(bench\/[\w-]+\.mjs)'/g)].map((m) => m[1]!),
    );
    const needed = new Set(
      [...testFiles, ...new Set(imported)].flatMap((path) =>
        [...read(path).matchAll(/apt-get install (?:-y )?([a-z0-9-]+(?: [a-z0-9-]+)*)/g)].flatMap(
          (m) => m[1]!.split(' '),
        ),
      ),
    );
    expect([...needed].sort()).toEqual(
      expect.arrayContaining(['redis-server', 'redis-tools', 'slowhttptest', 'tinyproxy']),
    );
    const installed = (text: string): string[] =>
      /apt-get install ((?:-[\w-]+ )*[a-z0-9 -]+)/.exec(text)![1]!.split(' ');
    const readme = installed(read('README.md'));
    const ci = installed(
      read('.ci/run')
        .split('\n')
        .find((line) => line.includes('apt-get install'))!,
    );
    expect([...needed].filter((pkg) => !readme.includes(pkg))).toEqual([]);
    expect([...needed].filter((pkg) => !ci.includes(pkg))).toEqual([]);
  });

  it('every relative link in README.md, CHANGELOG.md, docs/ and deploy/ resolves', () => {
    const problems = markdown.flatMap((path) => brokenLinks(path, read(path), repo));
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('docs/configuration.md documents every schema key with its env var and default, and no other', () => {
    const rows = configRows(read('docs/configuration.md'));
    const schema = FIELDS as Record<string, { env: string; default: unknown }>;
    const problems: string[] = [];
    for (const [key, field] of Object.entries(schema)) {
      const documented = rows.filter((row) => row.key === key);
      if (documented.length === 0) {
        problems.push(`${key} (${field.env}) is not documented in docs/configuration.md`);
      }
      if (documented.length > 1) problems.push(`${key} is documented ${documented.length} times`);
    }
    for (const row of rows) {
      const field = schema[row.key];
      if (field === undefined) {
        problems.push(
          `docs/configuration.md:${row.line} documents ${row.key}, which the schema lacks`,
        );
        continue;
      }
      if (row.env !== field.env) {
        problems.push(
          `docs/configuration.md:${row.line} ${row.key}: env var ${row.env}, schema says ${field.env}`,
        );
      }
      const problem = defaultProblem(row, field.default);
      if (problem !== undefined) problems.push(problem);
    }
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('every alert in deploy/monitoring has a runbook section and a runbook_url into it', () => {
    const ruleFiles = walk('deploy/monitoring').filter((path) => /\.ya?ml$/.test(path));
    const rules = ruleFiles.flatMap((path) => alertRules(read(path)));
    expect(rules.length).toBeGreaterThan(0);
    const runbook = read('docs/runbook.md');
    const problems = runbookProblems(rules, runbook);
    // A section for an alert that no longer exists misleads whoever is paged.
    const alerts = new Set(rules.map((rule) => rule.alert));
    for (const { text } of headings(runbook)) {
      if (/^OAuthSidecar\w+$/.test(text) && !alerts.has(text)) {
        problems.push(`docs/runbook.md has a section for ${text}, which no rule defines`);
      }
    }
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('docs/design.md "Dependencies" has a row for every runtime dependency', () => {
    const { dependencies, devDependencies } = JSON.parse(read('package.json')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    // What runs: the declared packages (pino), and those esbuild bundled into dist/ (declared as
    // devDependencies: the npm package carries them inside its bundle).
    const meta = JSON.parse(read('dist/bundle-meta.json')) as { inputs: Record<string, unknown> };
    const bundled = new Set(
      Object.keys(meta.inputs).flatMap((input) => {
        const match = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
        return match === null ? [] : [match[1]!];
      }),
    );
    const runtime = [
      ...Object.keys(dependencies),
      ...Object.keys(devDependencies).filter((name) => bundled.has(name)),
    ];
    const design = read('docs/design.md');
    const section = design.slice(design.indexOf('\n## Dependencies'));
    const rows = section.split('\n').filter((line) => line.startsWith('| `'));
    const missing = runtime.filter(
      (name) => !rows.some((row) => row.split('|')[1]?.includes(`\`${name}\``)),
    );
    expect(missing, `add a row to docs/design.md "Dependencies" for ${missing.join(', ')}`).toEqual(
      [],
    );
  });

  it("the Dockerfile's comments give reasons in at most 10 lines; the history is in docs/benchmarks.md", () => {
    const comments = read('Dockerfile')
      .split('\n')
      .filter((line) => line.startsWith('#'));
    expect(comments.length).toBeLessThanOrEqual(10);
    expect(comments.join('\n')).toContain('docs/benchmarks.md');
    expect(comments.join('\n')).not.toMatch(/\bpass\b/);
  });

  it('no comment cites a file outside the repository', () => {
    const sources = [
      ...['src', 'test', 'bench', 'deploy', 'scripts', 'config', '.ci'].flatMap(walk),
      'Dockerfile',
      'eslint.config.mjs',
      'vitest.config.ts',
      ...markdown,
    ].filter((path) => !path.startsWith('bench/results/') && path !== 'test/docs.test.ts');
    const problems = sources.flatMap((path) => outsideCitations(path, read(path), repo));
    expect(problems, `${problems.join('\n')}\n${CITATION_HINT}`).toEqual([]);
  });
});
