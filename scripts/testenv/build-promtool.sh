#!/usr/bin/env bash
# Builds promtool (checks the chart's alert rules and runs their unit tests) at the Prometheus
# version pinned in promtool/go.mod into a cache folder, idempotently: a folder whose stamp matches
# the pins is reused as it is. Built with the `remove_all_sd` tag: no service-discovery plugins,
# which rule checks and rule tests never use (the smallest build).
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/promtool"

# The pin lives in promtool/go.mod (one home); read it for the folder name.
version=$(awk '$1 == "github.com/prometheus/prometheus" && NF >= 2 { print $2; exit }' \
  "$mod/go.mod")
[[ -n $version ]] || { echo "promtool: no prometheus pin in $mod/go.mod" >&2; exit 1; }

pins="promtool-${version}"
root=${CHECKPOINT_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/testenv}
out="$root/$pins"
stamp="$out/.built"
want=$(cat "$mod/go.mod" "$mod/go.sum" "$here/build-promtool.sh" | sha256sum | cut -d' ' -f1)

# One build at a time (its own lock: it does not wait for the control-plane build).
mkdir -p "$root"
exec 9>"$root/.promtool.lock"
if ! flock --nonblock 9; then
  echo "promtool: another build holds $root/.promtool.lock; waiting for it" >&2
  flock 9
  echo "promtool: the other build finished" >&2
fi

if [[ -f $stamp && $(cat "$stamp") == "$want" ]] && [[ -x $out/promtool ]]; then
  echo "promtool: cached ($pins)" >&2
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "promtool: go is not installed (Go 1.26.8 or newer)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$stamp"
start=$(date +%s)
echo "promtool: building promtool (Prometheus module $version) into $out" \
  "(~10 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
(cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -tags remove_all_sd -ldflags=-s \
  -o "$out/promtool" github.com/prometheus/prometheus/cmd/promtool)

echo "$want" >"$stamp"
echo "promtool: built in $(($(date +%s) - start)) s into $out" >&2
echo "$out"
