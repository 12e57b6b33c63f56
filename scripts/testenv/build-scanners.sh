#!/usr/bin/env bash
# Installs the manifest scanners the render tests run over the chart, at the versions pinned in
# scanners/: checkov (a Python package, with every dependency pinned in scanners/requirements.txt,
# in a virtualenv of its own so it never touches the project's .venv) and kube-score (built from
# the Go module pinned in scanners/go.mod). Idempotent: a folder whose stamp matches the pins is
# reused as it is. Prints the folder on stdout (last line); it holds `checkov` and `kube-score`.
# Override the cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/scanners"
# shellcheck source=cache.sh
source "$here/cache.sh"

# The pins live in scanners/ (one home); read them for the folder name.
checkov_version=$(sed -n 's/^checkov==\([^ ]*\).*/\1/p' "$mod/requirements.txt")
kube_score_version=$(go_pin "$mod/go.mod" github.com/zegl/kube-score)
[[ -n $checkov_version && -n $kube_score_version ]] \
  || { echo "scanners: no checkov pin in $mod/requirements.txt or kube-score pin in $mod/go.mod" >&2; exit 1; }

cache_open scanners "checkov-${checkov_version}_kube-score-${kube_score_version}" \
  "$mod/go.mod" "$mod/go.sum" "$mod/requirements.txt" "$here/build-scanners.sh"
cache_hit "$out/checkov" "$out/kube-score" && exit 0
cache_need go "Go 1.26.8 or newer"
python=${CHECKPOINT_SCANNERS_PYTHON:-python3.11}
cache_need "$python" "set CHECKPOINT_SCANNERS_PYTHON to a Python 3.11"
cache_begin --clean  # a virtualenv is rebuilt whole, never over an old one

echo "scanners: installing checkov $checkov_version and its ~95 pinned dependencies into" \
  "$out/venv (~1-2 min the first time)" >&2
"$python" -m venv "$out/venv"
"$out/venv/bin/pip" install --quiet --disable-pip-version-check --no-input --require-hashes \
  -r "$mod/requirements.txt"
ln -s venv/bin/checkov "$out/checkov"
echo "scanners: checkov installed in $(($(date +%s) - cache_started)) s" >&2

echo "scanners: building kube-score $kube_score_version into $out" \
  "(~3 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
ldflags="-s -X main.version=${kube_score_version#v}"
(cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -ldflags="$ldflags" -o "$out/" \
  github.com/zegl/kube-score/cmd/kube-score)
cache_done
