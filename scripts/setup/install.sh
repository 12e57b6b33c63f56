#!/usr/bin/env bash
# Installs the project (editable) into its virtualenv from the hashed locks beside this script,
# no resolving and no file unchecked: every package of the lock with --no-deps and
# --require-hashes, then the project itself with the pinned build backend, offline.
#   install.sh VENV dev    the dev extra (dev.lock): `just setup`
#   install.sh VENV gate   the gate extra only (gate.lock): `just setup-gate`; nothing to do
#                          after a dev install, which holds every pin of gate.lock
# Idempotent: VENV/.installed (dev) and VENV/.installed-gate hold a hash of pyproject.toml and
# the lock they were installed from. A missing VENV is made by venv.sh first. Progress: stderr.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${1:?usage: install.sh VENV dev|gate}
what=${2:?usage: install.sh VENV dev|gate}
[[ $what == dev || $what == gate ]] || { echo "install: dev or gate, not $what" >&2; exit 2; }
[[ -e $venv ]] || "$here/venv.sh" "$venv"
stamp() { cat "$root/pyproject.toml" "$here/$1.lock" | sha256sum | cut -d' ' -f1; }
dev=$(stamp dev)
[[ -f $venv/.installed && $(cat "$venv/.installed") == "$dev" ]] && exit 0
if [[ $what == gate ]]; then
  want=$(stamp gate)
  [[ -f $venv/.installed-gate && $(cat "$venv/.installed-gate") == "$want" ]] && exit 0
else
  want=$dev
fi
lock=$here/$what.lock
echo "install: checkpoint-runtime (editable) with its $what pins ($lock) into $venv" >&2
pip=("$venv/bin/python" -m pip install --disable-pip-version-check)
# a gate run imports a few hundred of the lock's modules: each is compiled when first imported
[[ $what == dev ]] || pip+=(--no-compile)
# venv.sh installed gate.lock already unless it changed since (.lock-installed)
pins=$(grep -v '^ *#' "$lock" | sha256sum | cut -d' ' -f1)
if [[ $what == dev || ! -f $venv/.lock-installed || $(cat "$venv/.lock-installed") != "$pins" ]]; then
  "${pip[@]}" --no-deps --only-binary :all: --require-hashes -r "$lock" >&2
fi
# The project itself: built by the pinned backend of the lock, no isolated build environment.
"${pip[@]}" --no-deps --no-build-isolation --no-index -e "$root" >&2
"$venv/bin/python" -m pip check --disable-pip-version-check >&2
if [[ $what == dev ]]; then
  echo "$dev" >"$venv/.installed"
else
  echo "$pins" >"$venv/.lock-installed"
  echo "$want" >"$venv/.installed-gate"
fi
echo "install: done" >&2
