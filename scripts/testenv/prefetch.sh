#!/usr/bin/env bash
# Downloads the module graphs of every Go build of the test environment (kube-apiserver, etcd
# and the node binaries; opa and conftest; SeaweedFS; kube-score; promtool and the dashboard
# linter; kube-network-policies; pause; crane, cosign and syft: every folder here with a go.mod)
# into Go's module cache, all modules at once. `just check`
# runs it in the background at its start, so that on a machine without the cache the later
# builds' downloads (network-bound) overlap the earlier builds' compiles (CPU-bound) instead of
# following them. The module cache is safe for concurrent go commands; a build that runs before
# its modules are here downloads them itself, as without this script. With the cache warm it
# takes a few seconds. Exits 0 without go (the builds then say that go is missing).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v go >/dev/null || { echo "prefetch: go is not installed; nothing to fetch" >&2; exit 0; }
status=0
for module in "$here" "$here"/*/; do
  [[ -f $module/go.mod ]] || continue
  (cd "$module" && GOFLAGS=-mod=readonly nice -n 10 go mod download) \
    || { echo "prefetch: go mod download failed in $module (its build retries)" >&2; status=1; }
done
exit "$status"
