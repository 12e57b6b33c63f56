#!/usr/bin/env bash
# Writes every Python lock of the project with uv (pinned in the dev extra, so in dev.lock):
#
#   scripts/setup/dev.lock                     pyproject.toml's dev extra: `just setup`
#   scripts/setup/gate.lock                    the runtime, its gate extra and gate.in: venv.sh,
#                                              `just setup-gate`, the first run of scripts/just
#   scripts/image/requirements[-EXTRAS].lock   the image's wheelhouse, without extras and with
#                                              the Dockerfile's EXTRAS (scripts/image/build.sh)
#   scripts/image/requirements-gate.lock       the gate image's wheelhouse (build-gate.sh)
#   scripts/testenv/scanners/requirements.txt  checkov (scanners.in): build-scanners.sh
#   scripts/testenv/sbom-tools/requirements.txt  ntia-conformance-checker: build-sbom-tools.sh
#
# Each lock pins every package it needs by version and by the SHA-256 of each of that version's
# files on the package index; the installs use pip's --require-hashes, so a file that differs
# from the one locked is refused. The locks are written by this script only, never by hand.
# The gate and image locks are resolved within dev.lock (-c): a package has one version
# everywhere. A lock's current pins are preferred, so a run with unchanged inputs changes
# nothing; arguments go to every `uv pip compile`, e.g. `--upgrade-package idna` or `--upgrade`.
# Usage: lock.sh [UV_ARGS...]; the uv binary is $UV (default: the project's .venv/bin/uv).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
uv=${UV:-$root/.venv/bin/uv}
[[ -x $uv ]] || { echo "lock: no uv at $uv: run scripts/just setup (the dev extra pins it)" >&2; exit 1; }
cd "$root"
extras=$(sed -n 's/^ARG EXTRAS=//p' Dockerfile)

# lock OUTPUT INPUT... [-- OPTIONS]: one lock, for CPython 3.11 on x86_64 Linux (the project's
# machines and its image), with the hashes of every file of each pinned version.
lock() {
  local output=$1
  shift
  echo "lock: $output" >&2
  "$uv" --quiet pip compile --generate-hashes --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --custom-compile-command "scripts/just lock" \
    --no-config --output-file "$output" "$@" "${extra_args[@]}"
}
extra_args=("$@")
lock scripts/setup/dev.lock pyproject.toml --extra dev
lock scripts/setup/gate.lock pyproject.toml --extra gate scripts/setup/gate.in \
  --constraint scripts/setup/dev.lock
lock scripts/image/requirements.lock pyproject.toml --constraint scripts/setup/dev.lock
lock "scripts/image/requirements-$extras.lock" pyproject.toml --extra "$extras" \
  --constraint scripts/setup/dev.lock
# the gate image's wheelhouse (scripts/image/build-gate.sh): the runtime with its gate extra
lock scripts/image/requirements-gate.lock pyproject.toml --extra gate \
  --constraint scripts/setup/dev.lock
lock scripts/testenv/scanners/requirements.txt scripts/setup/scanners.in
lock scripts/testenv/sbom-tools/requirements.txt scripts/testenv/sbom-tools/requirements.in
echo "lock: done; $(cat scripts/setup/*.lock scripts/image/*.lock \
  scripts/testenv/scanners/requirements.txt scripts/testenv/sbom-tools/requirements.txt \
  | grep -cE '^[A-Za-z0-9]') pins" >&2
