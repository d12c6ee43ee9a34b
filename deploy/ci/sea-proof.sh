#!/usr/bin/env bash
# The single executable (npm run sea: dist/oauth-sidecar-linux-x64) with nothing beside it: copied
# alone into an empty directory and run with an environment whose PATH holds no node (an empty
# directory), it prints its version, runs the stand-in, checks a configuration against it, and
# serves one request through the proxy. Prints its size and its idle RSS after that request.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
node scripts/sea.mjs
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/run" "$work/empty-path"
cp dist/oauth-sidecar-linux-x64 "$work/run/oauth-sidecar"
cd "$work/run"
ls -A >"$work/listing" && [ "$(cat "$work/listing")" = "oauth-sidecar" ]
# The environment the executable gets: nothing but a PATH without node.
bare=(env -i "PATH=$work/empty-path" HOME="$work/run")
if "${bare[@]}" sh -c 'command -v node' >/dev/null 2>&1; then echo "node is on the bare PATH" >&2; exit 1; fi
wait_for() { # wait_for FILE PATTERN: the line (generous limit: a child process starting)
  for _ in $(seq 1 300); do
    if grep -q "$2" "$1" 2>/dev/null; then grep -m1 "$2" "$1"; return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for '$2' in $1:" >&2
  cat "$1" >&2
  return 1
}

version=$("${bare[@]}" ./oauth-sidecar --version 2>"$work/version.err")
# Nothing on stderr: no experimental warning, no "Code cache data rejected".
[ ! -s "$work/version.err" ] || { cat "$work/version.err" >&2; exit 1; }
expected=$(node -p 'require(process.argv[1]).version' "$root/package.json")
[ "$version" = "$expected" ] || { echo "--version said $version, package.json $expected" >&2; exit 1; }
echo "--version: $version"

"${bare[@]}" STANDIN_LISTEN=127.0.0.1:0 ./oauth-sidecar standin >"$work/standin.out" 2>&1 &
pids+=($!)
exports=$(wait_for "$work/standin.out" '^export ')
read -r -a vars <<<"${exports#export }"
echo "stand-in: ${vars[0]}"

"${bare[@]}" "${vars[@]}" ./oauth-sidecar check >"$work/check.out" 2>&1 || {
  cat "$work/check.out" >&2
  exit 1
}
grep -q 'grant: client_credentials' "$work/check.out"
echo "check: $(grep 'expires in' "$work/check.out")"

"${bare[@]}" "${vars[@]}" PROXY_LISTEN=127.0.0.1:0 ADMIN_LISTEN=127.0.0.1:0 ./oauth-sidecar >"$work/serve.out" 2>&1 &
serve=$!
pids+=("$serve")
listening=$(wait_for "$work/serve.out" 'oauth-sidecar listening')
proxy=$(sed -n 's/.*"proxy":"\([^"]*\)".*/\1/p' <<<"$listening")
admin=$(sed -n 's/.*"admin":"\([^"]*\)".*/\1/p' <<<"$listening")
for _ in $(seq 1 300); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$admin/readyz")" = 200 ] && break
  sleep 0.1
done
status=$(curl -s -o "$work/answer.json" -w '%{http_code}' "http://$proxy/v1.0/contracts/")
[ "$status" = 200 ] || { echo "GET through the proxy answered $status" >&2; cat "$work/serve.out" >&2; exit 1; }
grep -q '"data"' "$work/answer.json"
echo "served: GET /v1.0/contracts/ -> $status"
sleep 3
echo "size: $(du -m --apparent-size "$work/run/oauth-sidecar" | cut -f1) MiB; idle RSS after one request: $(awk '/VmRSS/{print int($2/1024)}' "/proc/$serve/status") MiB"
kill -TERM "$serve"
wait "$serve" || { echo "serve exited $? on SIGTERM" >&2; exit 1; }
echo "drained and exited 0 on SIGTERM"
