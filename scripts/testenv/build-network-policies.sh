#!/usr/bin/env bash
# Builds kube-network-policies (SIG Network's NetworkPolicy enforcer, which the test node runs) at
# the version pinned in network-policies/go.mod into a cache folder, idempotently: a folder whose
# stamp matches the pins is reused as it is.
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/network-policies"
# shellcheck source=cache.sh
source "$here/cache.sh"

# The pin lives in network-policies/go.mod (one home); read it for the folder name.
version=$(go_pin "$mod/go.mod" sigs.k8s.io/kube-network-policies)
[[ -n $version ]] || { echo "network-policies: no pin in $mod/go.mod" >&2; exit 1; }

cache_open network-policies "kube-network-policies-${version}" \
  "$mod/go.mod" "$mod/go.sum" "$here/build-network-policies.sh"
cache_hit "$out/kube-network-policies" && exit 0
cache_need go "Go 1.26.8 or newer"
cache_begin
echo "network-policies: building kube-network-policies $version into $out" \
  "(~6 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
(cd "$mod" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags=-s \
  -o "$out/kube-network-policies" sigs.k8s.io/kube-network-policies/cmd)
cache_done
