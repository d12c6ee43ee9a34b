// The plain Prometheus rule file (deploy/monitoring/oauth-sidecar.rules.yaml) is the PrometheusRule's
// spec.groups, so `promtool check rules` and a Prometheus without the operator read it directly.
//   node deploy/ci/extract-rules.mjs          write it
//   node deploy/ci/extract-rules.mjs --check  exit 1 when the checked-in file differs (CI)
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SOURCE = join(root, 'deploy/monitoring/prometheusrule.yaml');
export const TARGET = join(root, 'deploy/monitoring/oauth-sidecar.rules.yaml');

const HEADER = `# Generated from prometheusrule.yaml by deploy/ci/extract-rules.mjs (CI checks they agree):
# the same alerts as a plain Prometheus rule file, for \`promtool check rules\` and Prometheus
# without the operator (rule_files:). Edit prometheusrule.yaml, then run the script.
`;

/** The plain rule file's text for a PrometheusRule's text. */
export function plainRules(prometheusRule) {
  const { parse, stringify } = createRequire(import.meta.url)('yaml');
  const rule = parse(prometheusRule);
  if (rule.kind !== 'PrometheusRule') throw new Error(`kind ${rule.kind}, expected PrometheusRule`);
  return HEADER + stringify({ groups: rule.spec.groups }, { lineWidth: 0 });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = plainRules(readFileSync(SOURCE, 'utf8'));
  if (process.argv.includes('--check')) {
    if (readFileSync(TARGET, 'utf8') !== text) {
      console.error(`${TARGET} differs from ${SOURCE}: run node deploy/ci/extract-rules.mjs`);
      process.exit(1);
    }
    console.log('ok: oauth-sidecar.rules.yaml agrees with prometheusrule.yaml');
  } else {
    writeFileSync(TARGET, text);
  }
}
