#!/usr/bin/env bash
# Builds the S3-compatible server the object-store tests run against (SeaweedFS's `weed`) at the
# version pinned in s3-server/go.mod into a cache folder, idempotently: a folder whose stamp
# matches the pins is reused as it is. Prints the folder on stdout (last line). Override the cache
# root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/s3-server"
# shellcheck source=cache.sh
source "$here/cache.sh"

# The pin lives in s3-server/go.mod (one home); read it for the folder name.
version=$(go_pin "$mod/go.mod" github.com/seaweedfs/seaweedfs)
[[ -n $version ]] || { echo "s3-server: no seaweedfs pin in $mod/go.mod" >&2; exit 1; }

cache_open s3-server "seaweedfs-${version}" "$mod/go.mod" "$mod/go.sum" "$here/build-s3.sh"
cache_hit "$out/weed" && exit 0
cache_need go "Go 1.26.6 or newer"
cache_begin
echo "s3-server: building weed (SeaweedFS $version) into $out" \
  "(~20 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
(cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -ldflags=-s -o "$out/weed" \
  github.com/seaweedfs/seaweedfs/weed)
cache_done
