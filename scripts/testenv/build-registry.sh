#!/usr/bin/env bash
# Builds the test environment's OCI registry and the release's registry client, go-containerregistry's
# `crane` (`crane registry serve` is the registry; push, digest, manifest and copy the client), at
# the version pinned in registry/go.mod into a cache folder, idempotently: a folder whose stamp
# matches the pins is reused as it is. Prints the folder on stdout (last line). Override the
# cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/registry"
# shellcheck source=cache.sh
source "$here/cache.sh"

# The pin lives in registry/go.mod (one home); read it for the folder name.
version=$(go_pin "$mod/go.mod" github.com/google/go-containerregistry)
[[ -n $version ]] || { echo "registry: no go-containerregistry pin in $mod/go.mod" >&2; exit 1; }

cache_open registry "crane-${version}" "$mod/go.mod" "$mod/go.sum" "$here/build-registry.sh"
cache_hit "$out/crane" && exit 0
cache_need go "Go 1.26.8 or newer"
cache_begin
echo "registry: building crane (go-containerregistry $version) into $out (~1 min the first time)" >&2
ldflags="-s -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$version"
(cd "$mod" && GOFLAGS=-mod=readonly nice -n 10 go build -trimpath -ldflags="$ldflags" \
  -o "$out/crane" github.com/google/go-containerregistry/cmd/crane)
cache_done
