/**
 * The alert rules in their three places agree: the PrometheusRule, the plain rule file beside it
 * (deploy/ci/extract-rules.mjs) and the alert table of deploy/README.md.
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
  labels?: { severity?: string };
}

function alertsOf(path: string): Map<string, string> {
  const doc = parse(read(path)) as {
    spec?: { groups: { rules: Rule[] }[] };
    groups?: { rules: Rule[] }[];
  };
  const groups = doc.spec?.groups ?? doc.groups ?? [];
  return new Map(
    groups
      .flatMap((group) => group.rules)
      .filter((rule) => rule.alert !== undefined)
      .map((rule) => [rule.alert!, rule.labels?.severity ?? '']),
  );
}

/** `| OAuthSidecarDown | … | critical |` rows of the "Alerts" section. */
function readmeTable(): Map<string, string> {
  const section = read('deploy/README.md').split('\n## Alerts\n')[1]?.split('\n## ')[0] ?? '';
  const rows = section.split('\n').filter((line) => /^\| OAuthSidecar\w+ \|/.test(line));
  return new Map(
    rows.map((row) => {
      const cells = row.split('|').map((cell) => cell.trim());
      return [cells[1]!, cells.at(-2)!];
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

  it("deploy/README.md's alert table lists every alert of the rule file with its severity, and no other", () => {
    const rules = alertsOf('deploy/monitoring/prometheusrule.yaml');
    expect(rules.size).toBeGreaterThan(0);
    expect(readmeTable()).toEqual(rules);
  });
});
