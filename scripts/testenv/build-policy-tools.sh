#!/usr/bin/env bash
# Builds the policy tools (opa, conftest) at the versions pinned in policy-tools/go.mod into a
# cache folder, idempotently: a folder whose stamp matches the pins is reused as it is.
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/policy-tools"
# shellcheck source=cache.sh
source "$here/cache.sh"

# The pins live in policy-tools/go.mod (one home); read them for the folder name.
opa_version=$(go_pin "$mod/go.mod" github.com/open-policy-agent/opa)
conftest_version=$(go_pin "$mod/go.mod" github.com/open-policy-agent/conftest)
[[ -n $opa_version && -n $conftest_version ]] \
  || { echo "policy-tools: no opa/conftest pin in $mod/go.mod" >&2; exit 1; }

cache_open policy-tools "opa-${opa_version}_conftest-${conftest_version}" \
  "$mod/go.mod" "$mod/go.sum" "$here/build-policy-tools.sh"
cache_hit "$out/opa" "$out/conftest" && exit 0
cache_need go "Go 1.26.8 or newer"
cache_begin
echo "policy-tools: building opa $opa_version and conftest $conftest_version into $out" \
  "(~10 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
# Stamp conftest's version the way its release build does (`conftest --version`); OPA's is in
# its source.
ldflags="-s -X github.com/open-policy-agent/conftest/internal/version.Version=${conftest_version#v}"
(cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -ldflags="$ldflags" -o "$out/" \
  github.com/open-policy-agent/opa github.com/open-policy-agent/conftest)
cache_done
