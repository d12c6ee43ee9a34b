#!/usr/bin/env bash
# systemd-analyze verify on deploy/systemd/oauth-sidecar.service, in a scratch root: the host's
# unit directories (for the targets it names) and an executable at the unit's ExecStart path, so
# the check needs neither a running systemd nor the sidecar installed on this machine. verify
# exits 0 on what it only warns about (an unknown key, a bad value), so any output fails too.
set -euo pipefail
cd "$(dirname "$0")/../.."
unit=deploy/systemd/oauth-sidecar.service
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
exec_path=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
mkdir -p "$root/etc/systemd/system" "$root/usr/lib/systemd" "$root$(dirname "$exec_path")"
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
printf '#!/bin/sh\n' >"$root$exec_path" && chmod 0755 "$root$exec_path"
cp "$unit" "$root/etc/systemd/system/"
out=$(systemd-analyze verify --man=no --root="$root" /etc/systemd/system/oauth-sidecar.service 2>&1) || {
  echo "$out"
  exit 1
}
if [ -n "$out" ]; then
  echo "systemd-analyze verify warned:"
  echo "$out"
  exit 1
fi
echo "systemd-analyze verify $unit: no problem ($(systemd-analyze --version | head -1))"
