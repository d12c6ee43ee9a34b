/**
 * The alert rules in their places agree: the PrometheusRule, the plain rule file beside it
 * (deploy/ci/extract-rules.mjs), the alert table of deploy/README.md (name, `for:`, severity) and
 * the "Means." paragraph of each alert in docs/runbook.md (how long the condition must hold).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const ROOT = join(import.meta.dirname, '..');
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

interface Rule {
  alert?: string;
  for?: string;
  labels?: { severity?: string };
}

function rulesOf(path: string): Rule[] {
  const doc = parse(read(path)) as {
    spec?: { groups: { rules: Rule[] }[] };
    groups?: { rules: Rule[] }[];
  };
  const groups = doc.spec?.groups ?? doc.groups ?? [];
  return groups.flatMap((group) => group.rules).filter((rule) => rule.alert !== undefined);
}

function alertsOf(path: string): Map<string, string> {
  return new Map(rulesOf(path).map((rule) => [rule.alert!, rule.labels?.severity ?? '']));
}

/** `5m` → `5 minutes`, `1m` → `a minute`, as the runbook words a rule's `for:`. */
function spoken(duration: string): string {
  const minutes = /^(\d+)m$/.exec(duration);
  if (minutes === null) throw new Error(`for: ${duration}: only whole minutes are worded here`);
  return minutes[1] === '1' ? 'a minute' : `${minutes[1]} minutes`;
}

/** The "**Means.**" paragraph of each alert's section in docs/runbook.md, by alert. */
function runbookMeans(): Map<string, string> {
  const sections = read('docs/runbook.md').split('\n## ').slice(1);
  return new Map(
    sections
      .filter((section) => section.startsWith('OAuthSidecar'))
      .map((section) => {
        const [title, ...lines] = section.split('\n');
        const means = lines.join('\n').split('**Means.**')[1]?.split('\n\n')[0] ?? '';
        return [title!.trim(), means.replace(/\s+/g, ' ')];
      }),
  );
}

/** `| OAuthSidecarDown | … | 5m | critical |` rows of the "Alerts" section: `for:` and severity. */
function readmeTable(): Map<string, string> {
  const section = read('deploy/README.md').split('\n## Alerts\n')[1]?.split('\n## ')[0] ?? '';
  const rows = section.split('\n').filter((line) => /^\| OAuthSidecar\w+ \|/.test(line));
  return new Map(
    rows.map((row) => {
      const cells = row.split('|').map((cell) => cell.trim());
      return [cells[1]!, `${cells.at(-3)!} ${cells.at(-2)!}`];
    }),
  );
}

describe('alert rules', () => {
  it('the plain rule file is the PrometheusRule extracted (node deploy/ci/extract-rules.mjs)', () => {
    const result = spawnSync(process.execPath, ['deploy/ci/extract-rules.mjs', '--check'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(alertsOf('deploy/monitoring/oauth-sidecar.rules.yaml')).toEqual(
      alertsOf('deploy/monitoring/prometheusrule.yaml'),
    );
  });

  it("deploy/README.md's alert table lists every alert of the rule file with its for: and severity, and no other", () => {
    const rules = rulesOf('deploy/monitoring/prometheusrule.yaml');
    expect(rules.length).toBeGreaterThan(0);
    expect(readmeTable()).toEqual(
      new Map(
        rules.map((rule) => [rule.alert!, `${rule.for ?? 'none'} ${rule.labels?.severity ?? ''}`]),
      ),
    );
  });

  it('docs/runbook.md says how long each alert waits exactly as its rule does, and no other wait', () => {
    const rules = rulesOf('deploy/monitoring/prometheusrule.yaml');
    const means = runbookMeans();
    expect([...means.keys()].sort()).toEqual(rules.map((rule) => rule.alert!).sort());
    for (const rule of rules) {
      const text = means.get(rule.alert!)!;
      // Every "for N minutes" / "for a minute" of the paragraph is the rule's own `for:`.
      const stated = [...text.matchAll(/\bfor (a|\d+) minutes?\b/gi)].map((match) =>
        match[0].slice(4).toLowerCase(),
      );
      if (rule.for === undefined) {
        expect({ alert: rule.alert, stated }).toEqual({ alert: rule.alert, stated: [] });
        expect(text).toContain('no `for:`');
      } else {
        expect({ alert: rule.alert, stated: [...new Set(stated)] }).toEqual({
          alert: rule.alert,
          stated: [spoken(rule.for)],
        });
      }
    }
  });
});
