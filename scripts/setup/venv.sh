#!/usr/bin/env bash
# Creates the project's virtualenv ($1) holding pip, the pinned `just`, the runtime's
# dependencies with its gate extra and the build backend, at the versions of gate.lock beside
# this script: what `just gate`, `just render` and `just dist` need, no dev tools, no Go builds.
#
# The files come from a template virtualenv in the user's cache, keyed by the pins and the
# Python: the first run installs the template with pip (no resolving: every pin is listed, so
# --no-deps; ~125 MB of wheels), and every later virtualenv, in any clone, hardlinks its
# ~22,000 files in a few seconds instead of unpacking ~500 MB again. Nothing writes into the
# template after it is complete; pip in a virtualenv replaces files (it never edits them in
# place), so the links stay shared safely. Progress goes to stderr.
# Override the Python with $PYTHON (default python3.11), the cache root with $XDG_CACHE_HOME.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${1:?usage: venv.sh VENV}
py=${PYTHON:-python3.11}
lock="$here/gate.lock"
[[ ! -e $venv ]] || { echo "venv: $venv exists already" >&2; exit 1; }

python_id=$("$py" -c 'import sys, sysconfig; print(sys.version, sysconfig.get_platform(), sys.base_prefix)')
# The pins alone (not the comments), the Python, and v1: how the template is installed (below).
pins=$(grep -v '^#' "$lock")
key=$({ echo v1; echo "$pins"; echo "$python_id"; } | sha256sum | cut -c1-16)
root=${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/venv-templates
template="$root/$key"
mkdir -p "$root"
exec 9>"$template.lock"
if ! flock --nonblock 9; then
  echo "venv: another setup is installing the template $template; waiting for it" >&2
  flock 9
fi
if [[ ! -f $template/.complete ]]; then
  rm -rf "$template"
  echo "venv: first use of these pins: installing $(grep -c '==' "$lock") pinned packages" \
    "into the template $template (downloads ~125 MB; later virtualenvs link it)" >&2
  start=$(date +%s)
  "$py" -m venv --without-pip "$template"
  # pip runs from the wheel the Python bundles for ensurepip, as ensurepip runs it, and
  # installs itself and setuptools from there without compiling them (ensurepip compiles
  # ~1,000 modules first: ~4 s of CPU). A Python without the bundled wheels uses ensurepip.
  bundled=$("$py" -c 'import ensurepip, pathlib; print(pathlib.Path(ensurepip.__file__).parent / "_bundled")' 2>/dev/null || true)
  pip_wheel=$(compgen -G "$bundled/pip-*.whl" | head -n 1 || true)
  if [[ -n $pip_wheel ]]; then
    pip=(env "PYTHONPATH=$pip_wheel" "$template/bin/python" -m pip)
    itself=("$bundled"/pip-*.whl "$bundled"/setuptools-*.whl)
  else
    "$template/bin/python" -m ensurepip >&2
    pip=("$template/bin/python" -m pip)
    itself=()
  fi
  pip+=(--disable-pip-version-check)
  # Downloads in 4 pip processes at once (pip fetches one file at a time, and most of the
  # ~90 requests are latency), then one offline install.
  wheels="$template/.wheels"
  mkdir -p "$wheels/parts"
  grep -v '^#' "$lock" | awk -v d="$wheels/parts" 'NF { print > (d "/" NR % 4) }'
  pids=()
  for part in "$wheels"/parts/*; do
    "${pip[@]}" download --no-deps --only-binary :all: --progress-bar off -d "$wheels" \
      -r "$part" >&2 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  # --no-compile: a gate run imports a few hundred of the ~3,400 modules (the Kubernetes
  # client alone has ~1,900 it never imports); each virtualenv compiles what it imports.
  "${pip[@]}" install --no-index --find-links "$wheels" --no-deps --no-compile -r "$lock" \
    "${itself[@]}" >&2
  rm -rf "$wheels"
  touch "$template/.complete"
  echo "venv: template installed in $(($(date +%s) - start)) s" >&2
fi
exec 9>&-

start=$(date +%s)
"$py" -m venv --without-pip "$venv"
# lib/ holds site-packages. Hardlinks where the cache and the clone share a file system, else
# copies.
cp -al "$template/lib/." "$venv/lib/" 2>/dev/null || cp -a "$template/lib/." "$venv/lib/"
# The template's console scripts name one of its interpreters on their first line; the venv's
# name the venv's. The interpreter links and activate scripts are the venv's own already.
for script in "$template"/bin/*; do
  name=${script##*/}
  [[ -e $venv/bin/$name || $name == [Aa]ctivate* ]] && continue
  first=$(head -c 200 "$script" | head -n 1 | tr -d '\0')
  if [[ $first == "#!$template/bin/"* ]]; then
    { echo "#!$venv/bin/${first#"#!$template/bin/"}"; tail -n +2 "$script"; } >"$venv/bin/$name"
    chmod +x "$venv/bin/$name"
  else
    ln "$script" "$venv/bin/$name" 2>/dev/null || cp -p "$script" "$venv/bin/$name"
  fi
done
if grep -rlsF "$template" "$venv/bin" >/dev/null; then
  echo "venv: a script in $venv/bin still names the template" >&2
  exit 1
fi
grep -v '^#' "$lock" | sha256sum | cut -d' ' -f1 >"$venv/.lock-installed"  # setup-gate compares
echo "venv: $venv from the template $key in $(($(date +%s) - start)) s" >&2
