#!/usr/bin/env bash
# Builds kube-network-policies (SIG Network's NetworkPolicy enforcer, which the test node runs) at
# the version pinned in network-policies/go.mod into a cache folder, idempotently: a folder whose
# stamp matches the pins is reused as it is.
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/network-policies"

# The pin lives in network-policies/go.mod (one home); read it for the folder name.
version=$(awk '$1 == "sigs.k8s.io/kube-network-policies" && NF >= 2 { print $2; exit }' \
  "$mod/go.mod")
[[ -n $version ]] || { echo "network-policies: no pin in $mod/go.mod" >&2; exit 1; }

pins="kube-network-policies-${version}"
root=${CHECKPOINT_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/testenv}
out="$root/$pins"
stamp="$out/.built"
want=$(cat "$mod/go.mod" "$mod/go.sum" "$here/build-network-policies.sh" | sha256sum | cut -d' ' -f1)

# One build at a time (its own lock: it does not wait for the other builds).
mkdir -p "$root"
exec 9>"$root/.network-policies.lock"
if ! flock --nonblock 9; then
  echo "network-policies: another build holds $root/.network-policies.lock; waiting for it" >&2
  flock 9
  echo "network-policies: the other build finished" >&2
fi

if [[ -f $stamp && $(cat "$stamp") == "$want" ]] && [[ -x $out/kube-network-policies ]]; then
  echo "network-policies: cached ($pins)" >&2
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "network-policies: go is not installed (Go 1.26.8 or newer)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$stamp"
start=$(date +%s)
echo "network-policies: building kube-network-policies $version into $out" \
  "(~6 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
(cd "$mod" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags=-s \
  -o "$out/kube-network-policies" sigs.k8s.io/kube-network-policies/cmd)

echo "$want" >"$stamp"
echo "network-policies: built in $(($(date +%s) - start)) s into $out" >&2
echo "$out"
