#!/usr/bin/env bash
# Builds the test node's binaries into a cache folder, idempotently (a folder whose stamp matches
# the pins is reused as it is): kubelet, kube-controller-manager, kube-scheduler and kube-proxy
# from go.mod (the control plane's Kubernetes pin), CoreDNS at its pin, and the pause image
# (pause/, a static binary in a scratch image) as an image archive, pause.tar.
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=node-versions.env
source "$here/node-versions.env"
# shellcheck source=k8s-ldflags.sh
source "$here/k8s-ldflags.sh"
# shellcheck source=cache.sh
source "$here/cache.sh"

binaries=(kubelet kube-controller-manager kube-scheduler kube-proxy coredns pause)
cache_open testenv-node "node-kubernetes-${KUBERNETES_VERSION}_coredns-${COREDNS_VERSION}" \
  "$here/versions.env" "$here/node-versions.env" "$here/k8s-ldflags.sh" "$here/go.mod" \
  "$here/go.sum" "$here/build-node.sh" "$here/pause/main.go" "$here/pause/go.mod"
cache_hit "${binaries[@]/#/$out/}" --data "$out/pause.tar" && exit 0
cache_need go "Go 1.26 or newer"
cache_need buildah "run scripts/just system"
cache_begin

echo "testenv-node: building kubelet, kube-controller-manager, kube-scheduler and kube-proxy" \
  "$KUBERNETES_VERSION (about 20 min cold)" >&2
(cd "$here" && go build -trimpath -ldflags="$k8s_ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy)

# CoreDNS: its module has no local replaces, so `go install` builds it as published. The first
# fetch through the module proxy sometimes fails transiently: one retry.
echo "testenv-node: building coredns $COREDNS_VERSION (about 20 min cold)" >&2
coredns() {
  GOBIN="$out" GOFLAGS=-trimpath CGO_ENABLED=0 go install -ldflags=-s \
    "github.com/coredns/coredns@${COREDNS_VERSION}"
}
coredns || { echo "testenv-node: coredns build failed; retrying once" >&2; coredns; }

echo "testenv-node: building the pause image $PAUSE_IMAGE" >&2
(cd "$here/pause" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$out/pause" .)
ctr=$(buildah from scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah copy "$ctr" "$out/pause" /pause >/dev/null
buildah config --entrypoint '["/pause"]' --user 65535:65535 "$ctr"
buildah commit --quiet --rm "$ctr" "$PAUSE_IMAGE" >/dev/null
trap - EXIT
rm -f "$out/pause.tar"
buildah push --quiet "$PAUSE_IMAGE" "docker-archive:$out/pause.tar:$PAUSE_IMAGE" >&2
buildah rmi "$PAUSE_IMAGE" >/dev/null

cache_done
