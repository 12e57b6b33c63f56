#!/usr/bin/env bash
# Creates the project's virtualenv ($1) holding pip, the pinned `just`, the runtime's
# dependencies with its gate extra and the build backend, as gate.lock beside this script pins
# them (by version and SHA-256; lock.sh writes it): what `just gate`, `just render` and
# `just dist` need, no dev tools, no Go builds.
#
# The files come from a template virtualenv in the user's cache, keyed by the lock and the
# Python: the first run installs the template with pip (no resolving: every pin is listed, so
# --no-deps; every file checked against its hash, --require-hashes; ~125 MB of wheels), and
# every later virtualenv, in any clone, hardlinks its ~22,000 files in a few seconds instead of
# unpacking ~500 MB again. Nothing writes into the template after it is complete; pip in a
# virtualenv replaces files (it never edits them in place), so the links stay shared safely.
# Progress goes to stderr.
# Override the Python with $PYTHON (default python3.11), the cache root with $XDG_CACHE_HOME.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${1:?usage: venv.sh VENV}
py=${PYTHON:-python3.11}
lock="$here/gate.lock"
[[ ! -e $venv ]] || { echo "venv: $venv exists already" >&2; exit 1; }

python_id=$("$py" -c 'import sys, sysconfig; print(sys.version, sysconfig.get_platform(), sys.base_prefix)')
# The pins and their hashes (not the comments), the Python, and v2: how the template is
# installed (below).
pins=$(grep -v '^ *#' "$lock")
key=$({ echo v2; echo "$pins"; echo "$python_id"; } | sha256sum | cut -c1-16)
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
  echo "venv: first use of these pins: installing $(grep -c '^[A-Za-z0-9]' "$lock") pinned packages" \
    "into the template $template (downloads ~125 MB; later virtualenvs link it)" >&2
  start=$(date +%s)
  "$py" -m venv "$template"
  # --no-compile: a gate run imports a few hundred of the ~3,400 modules (the Kubernetes
  # client alone has ~1,900 it never imports); each virtualenv compiles what it imports.
  "$template/bin/python" -m pip install --disable-pip-version-check --no-deps --no-compile \
    --only-binary :all: --require-hashes -r "$lock" >&2
  # ... but the modules a gate run imports are compiled here once, and every virtualenv links
  # them: its first gate run then compiles only the project's own modules.
  "$template/bin/python" -c 'import deflate, helm_python, jsonschema, jsonschema_rs, kubernetes_validate, opapywasm, wasmtime, yaml'
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
grep -v '^ *#' "$lock" | sha256sum | cut -d' ' -f1 >"$venv/.lock-installed"  # setup-gate compares
echo "venv: $venv from the template $key in $(($(date +%s) - start)) s" >&2
