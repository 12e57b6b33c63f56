#!/usr/bin/env bash
# Builds the S3-compatible server the object-store tests run against (SeaweedFS's `weed`) at the
# version pinned in s3-server/go.mod into a cache folder, idempotently: a folder whose stamp
# matches the pins is reused as it is. Prints the folder on stdout (last line). Override the cache
# root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/s3-server"

# The pin lives in s3-server/go.mod (one home); read it for the folder name.
version=$(awk '$1 == "github.com/seaweedfs/seaweedfs" && NF >= 2 { print $2; exit }' "$mod/go.mod")
[[ -n $version ]] || { echo "s3-server: no seaweedfs pin in $mod/go.mod" >&2; exit 1; }

pins="seaweedfs-${version}"
root=${CHECKPOINT_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/testenv}
out="$root/$pins"
stamp="$out/.built"
want=$(cat "$mod/go.mod" "$mod/go.sum" "$here/build-s3.sh" | sha256sum | cut -d' ' -f1)

# One build at a time (its own lock: it does not wait for the control-plane build).
mkdir -p "$root"
exec 9>"$root/.s3-server.lock"
if ! flock --nonblock 9; then
  echo "s3-server: another build holds $root/.s3-server.lock; waiting for it" >&2
  flock 9
  echo "s3-server: the other build finished" >&2
fi

if [[ -f $stamp && $(cat "$stamp") == "$want" ]] && [[ -x $out/weed ]]; then
  echo "s3-server: cached ($pins)" >&2
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "s3-server: go is not installed (Go 1.26.6 or newer)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$stamp"
start=$(date +%s)
echo "s3-server: building weed (SeaweedFS $version) into $out" \
  "(~20 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
(cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -ldflags=-s -o "$out/weed" \
  github.com/seaweedfs/seaweedfs/weed)

echo "$want" >"$stamp"
echo "s3-server: built in $(($(date +%s) - start)) s into $out" >&2
echo "$out"
