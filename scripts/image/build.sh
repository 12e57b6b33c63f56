#!/usr/bin/env bash
# Builds the checkpoint-runtime container image offline, with no base image from a registry:
#   1. a Debian bookworm root filesystem from Debian packages (mmdebstrap, minbase + the
#      pinned python3 of rootfs-packages.txt) installed from exactly the .debs of rootfs.lock,
#      each checked against its SHA-256 (rootfs.sh), cached by the lock;
#   2. a wheelhouse: the wheels of the runtime's dependencies as requirements[-EXTRAS].lock pins
#      them (downloaded by pip, each checked against its SHA-256), and the project's wheel,
#      built on this host by the pinned build backend;
#   3. /opt/venv inside the root filesystem, installed from that wheelhouse only (--no-index,
#      --no-deps, --require-hashes), with all bytecode compiled now (the root filesystem is
#      read-only at run time);
#   4. an image from scratch with buildah (user, entrypoint, env, port as the Dockerfile's;
#      the OCI labels of labels.py), exported as a docker-archive that `podman load` and
#      `ctr -n k8s.io images import` accept.
# No file of the image keeps a setuid or setgid bit. SOURCE_DATE_EPOCH (default: the time of
# the newest commit that changed an input of the image) is the time of every file in the root
# filesystem's tarball and in the image's layer, and the image's creation time; the wheel's
# build backend and mmdebstrap take it too (rootfs.sh).
# Idempotent: the archive is cached under ~/.cache/checkpoint-runtime/image/<key>/, the key a
# hash of every input (sources, pyproject, Dockerfile, these scripts, the pins). Progress goes to
# stderr; the LAST line of stdout is the absolute path of the archive.
# Environment: EXTRAS (default: the Dockerfile's ARG EXTRAS; "" for local folders only),
# IMAGE_KIND (runtime, the default; gate: the gate image, build-gate.sh), PYTHON (the host's
# Python 3.11 with the pinned build backend; default: the project's .venv, which scripts/just
# makes from scripts/setup/gate.lock).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/image
log() { echo "image: [${SECONDS}s] $*" >&2; } # seconds since the script started

# --- tools -----------------------------------------------------------------------------------
missing=()
for tool in mmdebstrap buildah flock tar sha256sum; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
  log "missing ${missing[*]}; installing the pinned Debian packages (scripts/system/install-debian.sh)"
  "$root/scripts/system/install-debian.sh" || {
    log "could not install ${missing[*]}: run 'just system' (scripts/system/install-debian.sh) as root"
    exit 1
  }
fi
python=${PYTHON:-$root/.venv/bin/python}
if ! "$python" -c 'import sys, pip, hatchling; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  log "$python is not a Python 3.11 with pip and the pinned build backend (hatchling); the" \
    "wheelhouse must match the image's Python 3.11: run scripts/just setup-gate, or set" \
    "PYTHON=/path/to/python3.11 with hatchling installed"
  exit 1
fi

# --- what to build ----------------------------------------------------------------------------
version=$(sed -n 's/^version = "\([^"]*\)"$/\1/p' "$root/pyproject.toml" | head -1)
[[ -n $version ]] || { log "no version = \"...\" line in $root/pyproject.toml"; exit 1; }
# runtime: `checkpoint-runtime run` (the chart's image); gate: `checkpoint-runtime gate` with the
# chart and policies of this tree, for CI jobs (build-gate.sh), its archives in their own folder.
kind=${IMAGE_KIND:-runtime}
case $kind in
  runtime)
    name=docker.io/library/checkpoint-runtime:$version
    extras=${EXTRAS-$(sed -n 's/^ARG EXTRAS=//p' "$root/Dockerfile")}
    config=(--entrypoint '["checkpoint-runtime"]' --cmd '["run"]' --workingdir /tmp --port 8080/tcp)
    out_cache=$cache
    ;;
  gate)
    name=docker.io/library/checkpoint-runtime-gate:$version
    extras=gate
    # /work: where a CI job mounts its checkout, so the findings name its files by relative path
    config=(--entrypoint '["checkpoint-runtime", "gate"]' --cmd '[]' --workingdir /work)
    out_cache=${cache%/image}/gate-image
    ;;
  *)
    log "IMAGE_KIND=$kind: the kinds are runtime and gate"
    exit 1
    ;;
esac
# The wheelhouse's pins: scripts/setup/lock.sh (`just lock`) writes one lock per EXTRAS value.
lock=$here/requirements${extras:+-$extras}.lock
[[ -f $lock ]] || {
  log "no lock for EXTRAS=$extras ($lock); the locks are $(cd "$here" && echo requirements*.lock)"
  exit 1
}

# The image's inputs. Their revision: the newest commit that changed one of them (with -dirty
# when the tree changes them since), and its commit time, unless SOURCE_DATE_EPOCH is set.
input_paths=(pyproject.toml README.md Dockerfile src schemas charts policy ci scripts/image)
revision="" commit_time=""
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  revision=$(git -C "$root" log -1 --format=%H -- "${input_paths[@]}")
  commit_time=$(git -C "$root" log -1 --format=%ct -- "${input_paths[@]}")
  if [[ -n $(git -C "$root" status --porcelain -- "${input_paths[@]}") ]]; then
    revision+=-dirty
  fi
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-${commit_time:-0}}
labels_text=$("$python" "$here/labels.py" "$revision")
if [[ $kind == gate ]]; then
  description="The render gate of checkpoint-runtime, with its chart and policies, for CI jobs"
  labels_text=$(sed -e 's/^\(org.opencontainers.image.title\)=.*/\1=checkpoint-runtime-gate/' \
    -e "s/^\\(org.opencontainers.image.description\\)=.*/\\1=$description/" <<<"$labels_text")
fi
mapfile -t labels <<<"$labels_text"

# Every input of the image, by content: a change to any of them is a new key.
inputs_hash() {
  (cd "$root" && find "${input_paths[@]}" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' \
    ! -path '*.egg-info/*' -print0 | sort -z | xargs -0 sha256sum)
  echo "kind=$kind extras=$extras version=$version SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"
  printf 'label %s\n' "${labels[@]}"
}
inputs=$(inputs_hash)
key=$(sha256sum <<<"$inputs" | cut -c1-16)
out=$out_cache/$key
base_name=${name%:*}
archive=$out/${base_name##*/}-$version.tar

mkdir -p "$cache" "$out_cache"
exec 9>"$cache/.lock" # one image build at a time, whatever its kind
if ! flock -n 9; then
  log "waiting for another image build to finish (lock $cache/.lock)"
  flock 9
fi
if [[ -f $out/complete ]]; then
  log "cached: $name ($archive)"
  echo "$archive"
  exit 0
fi

started=$SECONDS
work=$(mktemp -d "$cache/work.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

# --- 1. the Debian root filesystem (cached by its pins) --------------------------------------
base_tar=$(PYTHON=$python "$here/rootfs.sh" "$cache/base")

# --- 2. the wheelhouse ------------------------------------------------------------------------
log "wheelhouse: the $(grep -c '^[A-Za-z0-9]' "$lock") wheels pinned by ${lock#"$root/"}, each checked" \
  "against its SHA-256 (pip downloads them the first time), and checkpoint-runtime's own"
"$python" -m pip download --disable-pip-version-check --progress-bar off --no-deps \
  --only-binary :all: --require-hashes --dest "$work/wheels" -r "$lock" >&2
"$python" -m pip wheel --disable-pip-version-check --no-deps --no-build-isolation --no-index \
  --wheel-dir "$work/wheels" "$root" >&2
wheel=$(cd "$work/wheels" && echo checkpoint_runtime-*.whl)
[[ -f $work/wheels/$wheel ]] || { log "no checkpoint-runtime wheel in the wheelhouse"; exit 1; }
# What the image's pip installs: every pin of the lock, and the project's wheel by its hash.
{
  cat "$lock"
  echo "checkpoint-runtime${extras:+[$extras]}==$version \\"
  echo "    --hash=sha256:$(sha256sum "$work/wheels/$wheel" | cut -d' ' -f1)"
} >"$work/wheels/install.txt"
log "wheelhouse: $(find "$work/wheels" -name '*.whl' | wc -l) wheels"

# --- 3. /opt/venv in the root filesystem --------------------------------------------------------
rootfs=$work/rootfs
mkdir "$rootfs"
tar -xpf "$base_tar" -C "$rootfs"
cp -r "$work/wheels" "$rootfs/tmp/wheels"
# A clean environment: the host's PIP_* or PYTHON* variables must not reach the image's pip.
in_rootfs() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 chroot "$rootfs" "$@"; }
log "installing checkpoint-runtime${extras:+[$extras]} into /opt/venv (offline, from the wheelhouse)"
# A venv without pip or setuptools (the runtime loads neither): Debian's pip wheel
# (python3-pip-whl, pinned by rootfs.lock) installs into it, run from the wheel.
in_rootfs python3 -m venv --without-pip /opt/venv
pip_wheel=$(cd "$rootfs" && echo usr/share/python-wheels/pip-*.whl)
[[ -f $rootfs/$pip_wheel ]] || { log "no wheel of pip in the root filesystem (python3-pip-whl)"; exit 1; }
in_rootfs /opt/venv/bin/python "/$pip_wheel/pip" install --quiet --no-compile --no-index \
  --find-links /tmp/wheels --no-cache-dir --disable-pip-version-check --no-deps --require-hashes \
  -r /tmp/wheels/install.txt >&2
in_rootfs /opt/venv/bin/python "/$pip_wheel/pip" check --disable-pip-version-check >&2
# What the image never loads (prune.txt; the gate also prune-gate.txt): shell patterns under
# site-packages, each match removed with its lines of its distribution's RECORD.
site=$rootfs/opt/venv/lib/python3.11/site-packages
removed=()
prune_from() { # LIST STRICT: STRICT=1 fails on a pattern that matches nothing
  local pattern folder records
  while read -r pattern; do
    mapfile -t matches < <(cd "$site" && compgen -G "$pattern" | sort)
    if ((${#matches[@]} == 0)); then
      (($2)) || continue # prune.txt in the gate's venv, which lacks the s3 extra's distributions
      log "${1##*/} names $pattern, which matches nothing in the venv: remove the line"
      exit 1
    fi
    for folder in "${matches[@]}"; do
      mapfile -t records < <(grep -l "^$folder/" "$site"/*.dist-info/RECORD)
      ((${#records[@]})) || { log "no RECORD in the venv lists $folder"; exit 1; }
      rm -rf "${site:?}/$folder"
      sed -i "\#^$folder/#d" "${records[@]}"
      removed+=("$folder")
    done
  done < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$1" | grep -v '^$')
}
if [[ $kind == gate ]]; then
  prune_from "$here/prune.txt" 0
  prune_from "$here/prune-gate.txt" 1
else
  prune_from "$here/prune.txt" 1
fi
log "left out of the venv: ${removed[*]}"
# Identical files stored once, as hard links (the Helm SDK's wheel carries its 85 MB library
# three times, under each of its sonames); every path and its bytes stay as installed.
"$python" - "$rootfs/opt/venv" <<'PYTHON' >&2
import hashlib, os, stat, sys
first, saved = {}, 0
for folder, dirs, files in os.walk(sys.argv[1]):
    dirs.sort()
    for name in sorted(files):
        path = os.path.join(folder, name)
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size < 65536:
            continue
        with open(path, "rb") as file:
            key = (info.st_size, info.st_mode, hashlib.sha256(file.read()).hexdigest())
        if key in first:
            os.unlink(path)
            os.link(first[key], path)
            saved += info.st_size
        else:
            first[key] = path
print(f"image: identical files of /opt/venv stored once (hard links): {saved / 1e6:.0f} MB saved")
PYTHON
log "compiling bytecode (the root filesystem is read-only at run time)"
# -f: also any bytecode written with the files' install times (Debian's packages compile theirs);
# unchecked-hash bytecode records none and needs no file time to match.
in_rootfs python3 -m compileall -q -f -j0 --invalidation-mode unchecked-hash \
  /usr/lib/python3.11 /usr/lib/python3 /usr/share/python3 /opt/venv/lib >&2
rm -rf "$rootfs/tmp/wheels"
[[ $kind == gate ]] && install -d -m 0755 "$rootfs/work"
chmod 1777 "$rootfs/tmp"
# No setuid or setgid file or folder: the runtime never changes its user (the chart's pod also
# forbids privilege escalation), so su, mount, passwd, unix_chkpwd... keep only their x bits.
mapfile -d '' privileged < <(find "$rootfs" -xdev \( -type f -o -type d \) -perm /6000 -print0)
if ((${#privileged[@]})); then
  log "removing the setuid/setgid bits of ${#privileged[@]} files and folders: $(printf '%s\n' \
    "${privileged[@]#"$rootfs"}" | sort | tr '\n' ' ')"
  chmod ug-s "${privileged[@]}"
fi
# The same bytes for the same files: sorted, one owner, every time clamped to SOURCE_DATE_EPOCH.
tar --numeric-owner --sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$rootfs" -cf "$work/rootfs.tar" .
rootfs_sha256=$(sha256sum "$work/rootfs.tar" | cut -d' ' -f1)
unpacked=$(du -sb "$rootfs" | cut -f1)
rm -rf "$rootfs"

# --- 4. the image ---------------------------------------------------------------------------------
log "assembling $name with buildah"
b=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
container=$("${b[@]}" from scratch)
"${b[@]}" add "$container" "$work/rootfs.tar" / >&2
rm "$work/rootfs.tar"
"${b[@]}" config \
  --user 10001:10001 \
  "${config[@]}" \
  --env PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 \
  --env PYTHONDONTWRITEBYTECODE=1 \
  --env PYTHONUNBUFFERED=1 \
  --env HOME=/tmp \
  "${labels[@]/#/--label=}" \
  "$container"
image_id=$("${b[@]}" commit --quiet --format oci --timestamp "$SOURCE_DATE_EPOCH" "$container" "$name")
mkdir -p "$out"
rm -f "$archive"
"${b[@]}" push --quiet "$name" "docker-archive:$archive:$name" >&2
"${b[@]}" rm "$container" >/dev/null

seconds=$((SECONDS - started))
printf '{"image": "%s", "extras": "%s", "unpacked_bytes": %s, "archive_bytes": %s, "build_seconds": %s, "rootfs_sha256": "%s", "image_id": "%s", "revision": "%s", "source_date_epoch": %s}\n' \
  "$name" "$extras" "$unpacked" "$(stat -c %s "$archive")" "$seconds" "$rootfs_sha256" \
  "$image_id" "$revision" "$SOURCE_DATE_EPOCH" >"$out/info.json"
echo "$inputs" >"$out/inputs.txt" # what the key covers, to tell why a build was not cached
touch "$out/complete"
log "built $name in ${seconds}s: $((unpacked / 1000000)) MB unpacked ($archive)"

# Keep the three newest archives of this kind (checkouts share the cache); each is 200-600 MB.
find "$out_cache" -mindepth 1 -maxdepth 1 -type d -name '????????????????' -printf '%T@ %p\n' |
  sort -rn | tail -n +4 | cut -d' ' -f2- | xargs -r rm -rf
echo "$archive"
