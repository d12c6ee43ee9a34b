#!/usr/bin/env bash
# Checks the PrometheusRule with promtool: syntax of every rule group (`promtool check rules`) and
# the alert unit tests in deploy/monitoring/tests/alerts.test.yaml (`promtool test rules`), and that
# the plain rule file deploy/monitoring/oauth-sidecar.rules.yaml agrees with the PrometheusRule.
# Needs promtool (apt-get install -y --no-install-recommends prometheus) and node_modules (yaml).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
command -v promtool >/dev/null || { echo "missing promtool: apt-get install -y prometheus" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "--- the plain rule file agrees with the PrometheusRule, and promtool reads it as it is"
node deploy/ci/extract-rules.mjs --check
promtool check rules deploy/monitoring/oauth-sidecar.rules.yaml

echo "--- extracting spec.groups of deploy/monitoring/prometheusrule.yaml"
node --input-type=module - "$root/deploy/monitoring/prometheusrule.yaml" "$work/oauth-sidecar.rules.yaml" <<'JS'
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
const require = createRequire(`${process.cwd()}/`);
const { parse, stringify } = require('yaml');
const [source, target] = process.argv.slice(2);
const rule = parse(readFileSync(source, 'utf8'));
if (rule.kind !== 'PrometheusRule') throw new Error(`${source}: kind ${rule.kind}, expected PrometheusRule`);
writeFileSync(target, stringify({ groups: rule.spec.groups }));
// The unit tests compare annotations exactly: they check the summary's templates, not the prose.
const summaryOnly = rule.spec.groups.map((g) => ({
  ...g,
  rules: g.rules.map((r) => (r.annotations ? { ...r, annotations: { summary: r.annotations.summary } } : r)),
}));
writeFileSync(`${target}.test`, stringify({ groups: summaryOnly }));
const alerts = rule.spec.groups.flatMap((g) => g.rules.filter((r) => r.alert).map((r) => r.alert));
writeFileSync(`${target}.alerts`, alerts.join('\n') + '\n');
JS
mkdir -p "$work/test"
cp "$work/oauth-sidecar.rules.yaml.test" "$work/test/oauth-sidecar.rules.yaml"
cp "$root/deploy/monitoring/tests/alerts.test.yaml" "$work/test/"

echo "--- promtool check rules"
promtool check rules "$work/oauth-sidecar.rules.yaml"

echo "--- every alert has a unit test that fires it and one where it stays quiet"
missing=0
while read -r alert; do
  evaluations=$(grep -c "alertname: $alert\$" "$work/test/alerts.test.yaml" || true)
  if ! grep -A2 "alertname: $alert\$" "$work/test/alerts.test.yaml" | grep 'exp_alerts: \[\]' >/dev/null; then
    echo "no quiet case for $alert" >&2; missing=1
  fi
  if ! grep -A3 "alertname: $alert\$" "$work/test/alerts.test.yaml" | grep 'exp_labels:' >/dev/null; then
    echo "no firing case for $alert" >&2; missing=1
  fi
  echo "  $alert: $evaluations evaluations"
done <"$work/oauth-sidecar.rules.yaml.alerts"
[ "$missing" = 0 ]

echo "--- promtool test rules deploy/monitoring/tests/alerts.test.yaml"
(cd "$work/test" && promtool test rules alerts.test.yaml)
echo "ok: rules valid, all alert tests pass"
