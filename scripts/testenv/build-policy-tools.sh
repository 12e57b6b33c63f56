#!/usr/bin/env bash
# Builds the policy tools (opa, conftest) at the versions pinned in policy-tools/go.mod into a
# cache folder, idempotently: a folder whose stamp matches the pins is reused as it is.
# Prints the folder on stdout (last line). Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/policy-tools"

# The pins live in policy-tools/go.mod (one home); read them for the folder name.
pin() { awk -v m="$1" '$1 == m && NF >= 2 { print $2; exit }' "$mod/go.mod"; }
opa_version=$(pin github.com/open-policy-agent/opa)
conftest_version=$(pin github.com/open-policy-agent/conftest)
[[ -n $opa_version && -n $conftest_version ]] \
  || { echo "policy-tools: no opa/conftest pin in $mod/go.mod" >&2; exit 1; }

pins="opa-${opa_version}_conftest-${conftest_version}"
root=${CHECKPOINT_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/testenv}
out="$root/$pins"
stamp="$out/.built"
want=$(cat "$mod/go.mod" "$mod/go.sum" "$here/build-policy-tools.sh" | sha256sum | cut -d' ' -f1)

# One build at a time (its own lock: it does not wait for the control-plane build).
mkdir -p "$root"
exec 9>"$root/.policy-tools.lock"
if ! flock --nonblock 9; then
  echo "policy-tools: another build holds $root/.policy-tools.lock; waiting for it" >&2
  flock 9
  echo "policy-tools: the other build finished" >&2
fi

if [[ -f $stamp && $(cat "$stamp") == "$want" ]] && [[ -x $out/opa && -x $out/conftest ]]; then
  echo "policy-tools: cached ($pins)" >&2
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "policy-tools: go is not installed (Go 1.26.8 or newer)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$stamp"
start=$(date +%s)
echo "policy-tools: building opa $opa_version and conftest $conftest_version into $out" \
  "(~10 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
# Stamp conftest's version the way its release build does (`conftest --version`); OPA's is in
# its source.
ldflags="-s -X github.com/open-policy-agent/conftest/internal/version.Version=${conftest_version#v}"
(cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -ldflags="$ldflags" -o "$out/" \
  github.com/open-policy-agent/opa github.com/open-policy-agent/conftest)

echo "$want" >"$stamp"
echo "policy-tools: built in $(($(date +%s) - start)) s into $out" >&2
echo "$out"
