#!/usr/bin/env bash
# Builds the release's signing tool, sigstore's cosign, at the version pinned in cosign/go.mod
# into a cache folder, idempotently: a folder whose stamp matches the pins is reused as it is.
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/cosign"
# shellcheck source=cache.sh
source "$here/cache.sh"

# The pin lives in cosign/go.mod (one home); read it for the folder name.
version=$(go_pin "$mod/go.mod" github.com/sigstore/cosign/v2)
[[ -n $version ]] || { echo "cosign: no cosign pin in $mod/go.mod" >&2; exit 1; }

cache_open cosign "cosign-${version}" "$mod/go.mod" "$mod/go.sum" "$here/build-cosign.sh"
cache_hit "$out/cosign" && exit 0
cache_need go "Go 1.26.8 or newer"
cache_begin
echo "cosign: building cosign $version into $out" \
  "(~15 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
# Stamp the version the way cosign's release build does (`cosign version`).
ldflags="-s -X sigs.k8s.io/release-utils/version.gitVersion=$version"
(cd "$mod" && GOFLAGS=-mod=readonly nice -n 10 go build -trimpath -ldflags="$ldflags" \
  -o "$out/cosign" github.com/sigstore/cosign/v2/cmd/cosign)
cache_done
