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
want=$(cat "$here/versions.env" "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)

# One build at a time: a second caller waits, then finds the stamp.
mkdir -p "$root"
exec 9>"$root/.lock"
if ! flock --nonblock 9; then
  echo "testenv: another build holds $root/.lock; waiting for it (a first build takes ~20 min)" >&2
  flock 9
  echo "testenv: the other build finished" >&2
fi

if [[ -f $stamp && $(cat "$stamp") == "$want" ]] \
  && [[ -x $out/kube-apiserver && -x $out/etcd && -x $out/helm ]]; then
  echo "testenv: cached ($pins)" >&2
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "testenv: go is not installed (Go 1.26 or newer)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$stamp"
start=$(date +%s)
echo "testenv: building into $out; the first build compiles Kubernetes and takes ~20 min on" \
  "2 cores (later builds reuse Go's build cache)" >&2

# kube-apiserver and etcd: built inside our module, which pins k8s.io/kubernetes and replaces each
# staging module with its published version (go.mod explains why).
echo "testenv: building kube-apiserver $KUBERNETES_VERSION and etcd $ETCD_VERSION" >&2
# Stamp the release version the way Kubernetes' own build does, so /version reports it (Helm
# checks a chart's kubeVersion against it).
minor=${KUBERNETES_VERSION#v1.}
minor=${minor%%.*}
kv=k8s.io/component-base/version
ldflags="-s -X $kv.gitVersion=$KUBERNETES_VERSION -X $kv.gitMajor=1 -X $kv.gitMinor=$minor"
ldflags+=" -X $kv.gitTreeState=clean -X $kv.buildDate=1970-01-01T00:00:00Z"
(cd "$here" && go build -trimpath -ldflags="$ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3)
mv "$out/server" "$out/etcd"  # go names a /vN module binary after the element before it

# helm: its module has no local replaces, so `go install` builds it as published.
echo "testenv: building helm $HELM_VERSION" >&2
GOBIN="$out" GOFLAGS=-trimpath go install \
  -ldflags="-s -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" \
  "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}"

echo "$want" >"$stamp"
echo "testenv: built in $(($(date +%s) - start)) s into $out" >&2
echo "$out"
