#!/usr/bin/env bash
# Builds the tools that check the chart's monitoring objects at the versions pinned in
# monitoring-tools/go.mod into a cache folder, idempotently (a folder whose stamp matches the pins
# is reused as it is):
# - promtool (checks the alert rules, runs their unit tests), from the Prometheus module with the
#   `remove_all_sd` tag: no service-discovery plugins, which rule checks never use (the smallest
#   build);
# - dashboard-lint (monitoring-tools/dashboard-lint): the Grafana dashboard against Grafana's
#   dashboard schema (Grafana Foundation SDK types) and its queries through the PromQL parser.
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/monitoring-tools"

# The pins live in monitoring-tools/go.mod (one home); read them for the folder name.
pin() { awk -v m="$1" '$1 == m && NF >= 2 { print $2; exit }' "$mod/go.mod"; }
prometheus_version=$(pin github.com/prometheus/prometheus)
sdk_version=$(pin github.com/grafana/grafana-foundation-sdk/go)
[[ -n $prometheus_version && -n $sdk_version ]] \
  || { echo "monitoring-tools: no prometheus/foundation-sdk pin in $mod/go.mod" >&2; exit 1; }

pins="monitoring-tools_prometheus-${prometheus_version}_foundation-sdk-${sdk_version}"
root=${CHECKPOINT_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/testenv}
out="$root/$pins"
stamp="$out/.built"
want=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/dashboard-lint/main.go" \
  "$here/build-monitoring-tools.sh" | sha256sum | cut -d' ' -f1)

# One build at a time (its own lock: it does not wait for the other builds).
mkdir -p "$root"
exec 9>"$root/.monitoring-tools.lock"
if ! flock --nonblock 9; then
  echo "monitoring-tools: another build holds $root/.monitoring-tools.lock; waiting for it" >&2
  flock 9
  echo "monitoring-tools: the other build finished" >&2
fi

if [[ -f $stamp && $(cat "$stamp") == "$want" ]] \
  && [[ -x $out/promtool && -x $out/dashboard-lint ]]; then
  echo "monitoring-tools: cached ($pins)" >&2
  echo "$out"
  exit 0
fi

command -v go >/dev/null \
  || { echo "monitoring-tools: go is not installed (Go 1.26.8 or newer)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$stamp"
start=$(date +%s)
echo "monitoring-tools: building promtool (Prometheus module $prometheus_version) and" \
  "dashboard-lint into $out (~8 min on 2 cores the first time; later builds reuse Go's build" \
  "cache)" >&2
# Stamp promtool's version the way the Prometheus release build does (`promtool --version`).
ldflags="-s -X github.com/prometheus/common/version.Version=${prometheus_version#v}"
(cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -tags remove_all_sd -ldflags="$ldflags" \
  -o "$out/" github.com/prometheus/prometheus/cmd/promtool ./dashboard-lint)

echo "$want" >"$stamp"
echo "monitoring-tools: built in $(($(date +%s) - start)) s into $out" >&2
echo "$out"
