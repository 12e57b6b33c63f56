#!/usr/bin/env bash
# Builds kube-apiserver, etcd and helm from the official Go modules at the pinned versions into
# a cache folder, idempotently: a folder whose stamp matches the pins is reused as it is.
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

pins="kubernetes-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_helm-${HELM_VERSION}"
root=${CHECKPOINT_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/testenv}
out="$root/$pins"
stamp="$out/.built"
want=$(cat "$here/versions.env" "$here/go.mod" "$here/go.sum" | sha256sum | cut -d' ' -f1)

if [[ -f $stamp && $(cat "$stamp") == "$want" ]] \
  && [[ -x $out/kube-apiserver && -x $out/etcd && -x $out/helm ]]; then
  echo "testenv: cached ($pins)" >&2
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "testenv: go is not installed" >&2; exit 1; }
mkdir -p "$out"
rm -f "$stamp"
start=$(date +%s)

# kube-apiserver and etcd: built inside our module, which pins k8s.io/kubernetes and replaces each
# staging module with its published version (go.mod explains why).
echo "testenv: building kube-apiserver $KUBERNETES_VERSION and etcd $ETCD_VERSION" >&2
(cd "$here" && go build -trimpath -ldflags=-s -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3)
mv "$out/server" "$out/etcd"  # go names a /vN module binary after the element before it

# helm: its module has no local replaces, so `go install` builds it as published.
echo "testenv: building helm $HELM_VERSION" >&2
GOBIN="$out" GOFLAGS=-trimpath go install -ldflags=-s "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}"

echo "$want" >"$stamp"
echo "testenv: built in $(($(date +%s) - start)) s into $out" >&2
echo "$out"
