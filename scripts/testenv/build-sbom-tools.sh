#!/usr/bin/env bash
# Builds the release's SBOM tools at the versions pinned in sbom-tools/: anchore's syft (the
# generator, from the Go module pinned in sbom-tools/go.mod) and ntia-conformance-checker (the
# checker, a Python package with every dependency pinned by hash in sbom-tools/requirements.txt,
# in a virtualenv of its own). Idempotent: a folder whose stamp matches the pins is reused as it
# is. Prints the folder on stdout (last line); it holds `syft` and `ntia-checker`. Override the
# cache root with CHECKPOINT_TESTENV_CACHE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/sbom-tools"
# shellcheck source=cache.sh
source "$here/cache.sh"

# The pins live in sbom-tools/ (one home); read them for the folder name.
syft_version=$(go_pin "$mod/go.mod" github.com/anchore/syft)
checker_version=$(sed -n 's/^ntia-conformance-checker==\([^ ]*\).*/\1/p' "$mod/requirements.txt")
[[ -n $syft_version && -n $checker_version ]] \
  || { echo "sbom-tools: no syft pin in $mod/go.mod or checker pin in $mod/requirements.txt" >&2; exit 1; }

cache_open sbom-tools "syft-${syft_version}_ntia-${checker_version}" \
  "$mod/go.mod" "$mod/go.sum" "$mod/requirements.txt" "$here/build-sbom-tools.sh"
cache_hit "$out/syft" "$out/ntia-checker" && exit 0
cache_need go "Go 1.26.8 or newer"
python=${CHECKPOINT_SCANNERS_PYTHON:-python3.11}
cache_need "$python" "set CHECKPOINT_SCANNERS_PYTHON to a Python 3.11"
cache_begin --clean # a virtualenv is rebuilt whole, never over an old one

echo "sbom-tools: installing ntia-conformance-checker $checker_version and its pinned" \
  "dependencies into $out/venv" >&2
"$python" -m venv "$out/venv"
"$out/venv/bin/pip" install --quiet --disable-pip-version-check --no-input --require-hashes \
  -r "$mod/requirements.txt"
ln -s venv/bin/ntia-checker "$out/ntia-checker"

echo "sbom-tools: building syft $syft_version into $out" \
  "(~20 min on 2 cores the first time; later builds reuse Go's build cache)" >&2
# Stamp the version the way syft's release build does (`syft version`).
ldflags="-s -X main.version=$syft_version"
(cd "$mod" && GOFLAGS=-mod=readonly nice -n 10 go build -trimpath -ldflags="$ldflags" \
  -o "$out/syft" github.com/anchore/syft/cmd/syft)
cache_done
