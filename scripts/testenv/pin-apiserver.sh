#!/usr/bin/env bash
# Writes (or rewrites) the build module of one extra kube-apiserver minor: apiserver-1.N/go.mod
# and go.sum, which require k8s.io/kubernetes at VERSION (e.g. v1.34.4) and replace its staging
# modules with their published v0.N.x (sync-replaces.sh), then `go mod tidy`. That go.mod is the
# one home of the minor's pin: build-apiservers.sh builds every apiserver-1.N/ it finds, and the
# Python side reads the versions from there. Downloads modules, compiles nothing.
#
#   scripts/testenv/pin-apiserver.sh v1.34.4 [MODULE@VERSION...]
#
# Extra MODULE@VERSION arguments are required on top of what Kubernetes asks for, for an old
# minor whose pinned dependency no longer compiles with today's Go.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=${1:?usage: pin-apiserver.sh VERSION [MODULE@VERSION...]}
shift
[[ $version =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "pin-apiserver: not a v1.N.P: $version" >&2; exit 2; }
minor="1.${BASH_REMATCH[1]}"
mod="$here/apiserver-$minor"
mkdir -p "$mod"
{
  echo "// Pins kube-apiserver $minor for the compatibility tier (written by"
  echo "// scripts/testenv/pin-apiserver.sh $version${*:+ $*}; rerun it to change the pin)."
  echo "// Only kube-apiserver is built from here; etcd and helm come from the main build (../go.mod)."
  echo "module checkpoint-runtime/apiserver-$minor"
  echo
  echo "go 1.26.0"
  echo
  echo "tool k8s.io/kubernetes/cmd/kube-apiserver"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  "$here/sync-replaces.sh" "$version"
} >"$mod/go.mod"
rm -f "$mod/go.sum"
cd "$mod"
for extra in "$@"; do
  go mod edit -require="$extra"
done
go mod tidy
echo "pin-apiserver: $mod/go.mod requires k8s.io/kubernetes $version" >&2
