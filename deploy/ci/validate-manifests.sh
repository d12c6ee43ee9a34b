#!/usr/bin/env bash
# Renders every kustomization under deploy/ with `kubectl kustomize` (when kubectl is installed)
# and runs test/deploy-manifests.test.ts on both that output and the built-in renderer's: schemas
# (kubernetes-models), unknown fields (`satisfies` type check), cross-references, metric names; and
# test/deploy-component-per-app.test.ts (two apps in one namespace: no kind/namespace/name twice;
# ports moved) and test/kustomize-replacements.test.ts (the renderer's replacements).
# Needs node_modules (npm ci). Without kubectl only the built-in renderer is checked (as in npm test).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if command -v kubectl >/dev/null; then
  echo "--- kubectl kustomize ($(kubectl version --client 2>/dev/null | grep -i kustomize || echo 'kustomize version unknown'))"
  for k in base monitoring overlays/shared-gateway overlays/shared-gateway-redis \
    overlays/shared-gateway-sentinel examples/your-app \
    examples/curve-builder examples/two-apps examples/gateway-client; do
    kubectl kustomize "deploy/$k" >"$work/${k//\//_}.yaml"
    echo "  deploy/$k: $(grep -c '^kind:' "$work/${k//\//_}.yaml") objects"
  done
  export DEPLOY_KUBECTL_RENDER_DIR="$work"
else
  echo "--- kubectl not installed: checking the built-in renderer's output only"
fi

echo "--- vitest: manifests, the component once per app, the renderer's replacements"
npx vitest run test/deploy-manifests.test.ts test/deploy-component-per-app.test.ts \
  test/kustomize-replacements.test.ts
if [ -n "${DEPLOY_KUBECTL_RENDER_DIR:-}" ]; then
  echo "--- kubectl kustomize output against the built-in renderer"
  npx vitest run --config deploy/validate/vitest.config.ts
fi
echo "ok: manifests valid"
