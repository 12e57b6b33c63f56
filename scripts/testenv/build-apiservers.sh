#!/usr/bin/env bash
# Builds kube-apiserver for every extra minor of the compatibility tier (each apiserver-1.N/
# module beside this script, pinned by its go.mod; pin-apiserver.sh writes one), or only for the
# minors given (`build-apiservers.sh 1.34 1.37`), one after another, each into its own cache
# folder keyed by its pin: a folder whose stamp matches the pins is reused as it is. Only
# kube-apiserver is built here: etcd and helm are the main build's (build.sh), shared by every
# minor, and so are Go's module and build caches (run it after build.sh: the packages both
# builds share at the same versions are compiled once).
# Prints each minor's folder on stdout, one line each, in the order built.
# Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cache.sh
source "$here/cache.sh"

if (($#)); then
  minors=("$@")
else
  minors=()
  for mod in "$here"/apiserver-1.*/; do
    [[ -f $mod/go.mod ]] && minors+=("$(basename "$mod")")
  done
  mapfile -t minors < <(printf '%s\n' "${minors[@]#apiserver-}" | sort -V)
fi

for minor in "${minors[@]}"; do
  mod="$here/apiserver-$minor"
  [[ -f $mod/go.mod ]] || { echo "apiservers: no module for $minor ($mod/go.mod)" >&2; exit 2; }
  KUBERNETES_VERSION=$(go_pin "$mod/go.mod" k8s.io/kubernetes)
  [[ $KUBERNETES_VERSION == "v$minor".* ]] \
    || { echo "apiservers: $mod/go.mod pins k8s.io/kubernetes ${KUBERNETES_VERSION:-nothing}" >&2; exit 1; }
  # shellcheck source=k8s-ldflags.sh
  source "$here/k8s-ldflags.sh"
  cache_open "apiserver-$minor" "kube-apiserver-${KUBERNETES_VERSION}" \
    "$mod/go.mod" "$mod/go.sum" "$here/k8s-ldflags.sh" "$here/build-apiservers.sh"
  cache_hit "$out/kube-apiserver" && continue
  cache_need go "Go 1.26 or newer"
  cache_begin
  echo "apiservers: building kube-apiserver $KUBERNETES_VERSION into $out (minutes on 2 cores" \
    "the first time; the packages it shares with the main build come from Go's build cache)" >&2
  (cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -ldflags="$k8s_ldflags" \
    -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  cache_done
done
