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

# The pins live in scanners/ (one home); read them for the folder name.
checkov_version=$(sed -n 's/^checkov==//p' "$mod/requirements.txt")
kube_score_version=$(awk '$1 == "github.com/zegl/kube-score" && NF >= 2 { print $2; exit }' "$mod/go.mod")
[[ -n $checkov_version && -n $kube_score_version ]] \
  || { echo "scanners: no checkov pin in $mod/requirements.txt or kube-score pin in $mod/go.mod" >&2; exit 1; }

pins="checkov-${checkov_version}_kube-score-${kube_score_version}"
root=${CHECKPOINT_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/testenv}
out="$root/$pins"
stamp="$out/.built"
want=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/requirements.txt" "$here/build-scanners.sh" \
  | sha256sum | cut -d' ' -f1)

# One install at a time (its own lock: it does not wait for the other builds).
mkdir -p "$root"
exec 9>"$root/.scanners.lock"
if ! flock --nonblock 9; then
  echo "scanners: another install holds $root/.scanners.lock; waiting for it" >&2
  flock 9
  echo "scanners: the other install finished" >&2
fi

if [[ -f $stamp && $(cat "$stamp") == "$want" ]] && [[ -x $out/checkov && -x $out/kube-score ]]; then
  echo "scanners: cached ($pins)" >&2
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "scanners: go is not installed (Go 1.26.8 or newer)" >&2; exit 1; }
python=${CHECKPOINT_SCANNERS_PYTHON:-python3.11}
command -v "$python" >/dev/null \
  || { echo "scanners: $python is not installed (set CHECKPOINT_SCANNERS_PYTHON to a Python 3.11)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
start=$(date +%s)

echo "scanners: installing checkov $checkov_version and its ~95 pinned dependencies into" \
  "$out/venv (~1-2 min the first time)" >&2
"$python" -m venv "$out/venv"
"$out/venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
  -r "$mod/requirements.txt"
ln -s venv/bin/checkov "$out/checkov"
echo "scanners: checkov installed in $(($(date +%s) - start)) s" >&2

echo "scanners: building kube-score $kube_score_version into $out" \
  "(~3 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
ldflags="-s -X main.version=${kube_score_version#v}"
(cd "$mod" && GOFLAGS=-mod=readonly go build -trimpath -ldflags="$ldflags" -o "$out/" \
  github.com/zegl/kube-score/cmd/kube-score)

echo "$want" >"$stamp"
echo "scanners: installed in $(($(date +%s) - start)) s into $out" >&2
echo "$out"
