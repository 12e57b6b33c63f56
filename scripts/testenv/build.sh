#!/usr/bin/env bash
# Builds kube-apiserver, etcd and helm from the official Go modules at the pinned versions into
# a cache folder, idempotently: a folder whose stamp matches the pins is reused as it is.
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=k8s-ldflags.sh
source "$here/k8s-ldflags.sh"
# shellcheck source=cache.sh
source "$here/cache.sh"

cache_open testenv "kubernetes-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_helm-${HELM_VERSION}" \
  "$here/versions.env" "$here/k8s-ldflags.sh" "$here/go.mod" "$here/go.sum" "$here/build.sh"
cache_hit "$out/kube-apiserver" "$out/etcd" "$out/helm" && exit 0
cache_need go "Go 1.26 or newer"
cache_begin
echo "testenv: building into $out; the first build compiles Kubernetes and takes ~20 min on" \
  "2 cores (later builds reuse Go's build cache)" >&2

# kube-apiserver and etcd: built inside our module, which pins k8s.io/kubernetes and replaces each
# staging module with its published version (go.mod explains why).
echo "testenv: building kube-apiserver $KUBERNETES_VERSION and etcd $ETCD_VERSION" >&2
(cd "$here" && go build -trimpath -ldflags="$k8s_ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3)
mv "$out/server" "$out/etcd"  # go names a /vN module binary after the element before it

# helm: its module has no local replaces, so `go install` builds it as published.
echo "testenv: building helm $HELM_VERSION" >&2
GOBIN="$out" GOFLAGS=-trimpath go install \
  -ldflags="-s -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" \
  "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}"

cache_done
