#!/usr/bin/env bash
# Checks the alert rules with promtool: the plain rule file deploy/monitoring/oauth-sidecar.rules.yaml
# agrees with the PrometheusRule and is valid (`promtool check rules`), every alert has a firing and
# a quiet case in deploy/monitoring/tests/alerts.test.yaml, and that test file passes exactly as a
# reader runs it from its folder: `cd deploy/monitoring/tests && promtool test rules alerts.test.yaml`
# (its rule_files names ../oauth-sidecar.rules.yaml; its annotations are the rules' own, in full).
# Needs promtool (apt-get install -y --no-install-recommends prometheus) and node_modules (yaml).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
command -v promtool >/dev/null || { echo "missing promtool: apt-get install -y prometheus" >&2; exit 1; }
rules=deploy/monitoring/oauth-sidecar.rules.yaml
tests=deploy/monitoring/tests/alerts.test.yaml

echo "--- the plain rule file agrees with the PrometheusRule, and promtool reads it as it is"
node deploy/ci/extract-rules.mjs --check
promtool check rules "$rules"

echo "--- every alert has a unit test that fires it and one where it stays quiet"
missing=0
while read -r alert; do
  evaluations=$(grep -c "alertname: $alert\$" "$tests" || true)
  if ! grep -A2 "alertname: $alert\$" "$tests" | grep 'exp_alerts: \[\]' >/dev/null; then
    echo "no quiet case for $alert" >&2; missing=1
  fi
  if ! grep -A3 "alertname: $alert\$" "$tests" | grep 'exp_labels:' >/dev/null; then
    echo "no firing case for $alert" >&2; missing=1
  fi
  echo "  $alert: $evaluations evaluations"
done < <(sed -n 's/^ *- alert: *//p' "$rules")
[ "$missing" = 0 ]

echo "--- cd deploy/monitoring/tests && promtool test rules alerts.test.yaml"
(cd deploy/monitoring/tests && promtool test rules alerts.test.yaml)
echo "ok: rules valid, all alert tests pass"
