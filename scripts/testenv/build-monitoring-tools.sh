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
# shellcheck source=cache.sh
source "$here/cache.sh"

# The pins live in monitoring-tools/go.mod (one home); read them for the folder name.
prometheus_version=$(go_pin "$mod/go.mod" github.com/prometheus/prometheus)
sdk_version=$(go_pin "$mod/go.mod" github.com/grafana/grafana-foundation-sdk/go)
[[ -n $prometheus_version && -n $sdk_version ]] \
  || { echo "monitoring-tools: no prometheus/foundation-sdk pin in $mod/go.mod" >&2; exit 1; }

cache_open monitoring-tools \
  "monitoring-tools_prometheus-${prometheus_version}_foundation-sdk-${sdk_version}" \
  "$mod/go.mod" "$mod/go.sum" "$mod/dashboard-lint/main.go" "$here/build-monitoring-tools.sh"
cache_hit "$out/promtool" "$out/dashboard-lint" && exit 0
cache_need go "Go 1.26.8 or newer"
cache_begin
echo "monitoring-tools: building promtool (Prometheus module $prometheus_version) and" \
  "dashboard-lint into $out (~8 min on 2 cores the first time; later builds reuse Go's build" \
  "cache)" >&2
# Stamp promtool's version the way the Prometheus release build does (`promtool --version`).
ldflags="-s -X github.com/prometheus/common/version.Version=${prometheus_version#v}"
(cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -tags remove_all_sd -ldflags="$ldflags" \
  -o "$out/" github.com/prometheus/prometheus/cmd/promtool ./dashboard-lint)
cache_done
