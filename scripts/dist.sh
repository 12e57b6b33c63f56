#!/usr/bin/env bash
# Builds the checkpoint-runtime wheel (runtime code, schemas, and for the gate extra the chart,
# policies and example values) into a folder: dist/ by default, or the folder given as $1.
# Progress goes to stderr; the last stdout line is the folder, for scripts that install from it.
# Built by pip, the standard build front-end, with any Python 3.11 ($PYTHON, else the project's
# .venv, else python3.11): with the pinned build backend when that Python has it (the dev
# install does: the same bytes every time), else in pip's isolated build environment.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}
[[ -n ${PYTHON:-} || -x $py ]] || py=python3.11
out=${1:-$root/dist}
isolation=()
if ! "$py" -c 'import hatchling' 2>/dev/null; then
  echo "dist: $py has no build backend: pip builds in an isolated environment" >&2
else
  isolation=(--no-build-isolation)
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/checkpoint_runtime-*.whl
echo "dist: building the checkpoint-runtime wheel into $out" >&2
start=$(date +%s)
"$py" -m pip wheel --no-deps "${isolation[@]}" --disable-pip-version-check \
  --wheel-dir "$out" "$root" >&2
# The package data comes in through symlinks (src/checkpoint_runtime/data/*): a source tree
# without the top-level folders would build a wheel that fails at run time, so check here.
"$py" - "$out" <<'PY' >&2
import sys, zipfile
from pathlib import Path

(wheel,) = Path(sys.argv[1]).glob("checkpoint_runtime-*.whl")
names = set(zipfile.ZipFile(wheel).namelist())
prefix = "checkpoint_runtime/data/"
needed = ["schemas/runtime-config.schema.json", "chart/Chart.yaml", "policy/rbac.rego"]
missing = [name for name in needed if prefix + name not in names]
if missing or any(name.startswith("checkpoint_testenv/") for name in names):
    sys.exit(f"dist: {wheel.name} is incomplete (missing {missing}) or ships checkpoint_testenv")
size = wheel.stat().st_size // 1024
print(f"dist: {wheel.name}: {len(names)} files, {size} KiB")
PY
echo "dist: built in $(($(date +%s) - start)) s" >&2
echo "$out"
