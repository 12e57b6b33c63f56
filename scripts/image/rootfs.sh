#!/usr/bin/env bash
# The image's Debian bookworm root filesystem as a tarball, from exactly the .debs of rootfs.lock
# (every package by name, version, architecture and SHA-256; lock-debian.sh writes it):
#   1. debs.py takes each .deb from ~/.cache/checkpoint-runtime/debs/<sha256>.deb (downloading
#      it from the lock's URL when missing), checks its SHA-256 against the lock's and puts it in
#      a flat apt repository with only those packages; a .deb whose hash differs is refused;
#   2. mmdebstrap --variant=minbase installs every locked package from that repository alone
#      (apt sees no other source, so a dependency the lock lacks fails the build), without docs,
#      man pages, info pages or locales (copyright files stay) or glibc's iconv modules (gconv:
#      Python's codecs are its own);
#   3. debs.py checks that the installed packages (dpkg-query -W) are exactly the lock's.
# Cached under CACHE_DIR/<key>/ by a hash of the lock, this script, debs.py, the image's apt
# sources and SOURCE_DATE_EPOCH; prints the tarball's path.
# Usage: rootfs.sh CACHE_DIR   (PYTHON: a Python 3 for debs.py; build.sh passes its own)
# Called by build.sh, which holds the image lock.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:?usage: rootfs.sh CACHE_DIR}
python=${PYTHON:-python3}
debs=${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/debs
lock=$here/rootfs.lock
log() { echo "image: $*" >&2; }

# mmdebstrap's SOURCE_DATE_EPOCH (the time of its files and logs, its reproducible mode): the
# newest commit that changed the lock or this script, else the caller's.
epoch=$(git -C "$here" log -1 --format=%ct -- rootfs.sh rootfs.lock debs.py 2>/dev/null || true)
export SOURCE_DATE_EPOCH=${epoch:-${SOURCE_DATE_EPOCH:-0}}
key=$({ cat "$lock" "${BASH_SOURCE[0]}" "$here/debs.py" "$here/debian.sources"; echo "$SOURCE_DATE_EPOCH"; } |
  sha256sum | cut -c1-16)
tarball=$cache/$key/rootfs.tar
if [[ -f $tarball ]]; then
  log "Debian root filesystem cached ($tarball)"
  echo "$tarball"
  exit 0
fi

mkdir -p "$cache/$key"
# The repository's path is the same for every build of this key: apt and dpkg see it.
repo=$cache/$key/repo
partial=$cache/$key/rootfs.partial-$$.tar
installed=$cache/$key/installed.partial-$$
trap 'rm -rf "$partial" "$installed" "$repo"' EXIT
rm -rf "$repo"
log "checking the $(grep -c '^[a-z0-9]' "$lock") .debs of ${lock##*/} against their SHA-256 ($debs)"
include=$("$python" "$here/debs.py" repo "$lock" "$debs" "$repo")

log "building the Debian bookworm root filesystem with mmdebstrap from those .debs only"
if ! mmdebstrap --variant=minbase --include="$include" \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/gconv/*' \
  --customize-hook="chroot \"\$1\" dpkg-query -W -f='\${Package} \${Version} \${Architecture}\n' >$installed" \
  --customize-hook='rm -f "$1/etc/apt/sources.list"' \
  --customize-hook="cp $here/debian.sources \"\$1/etc/apt/sources.list.d/0000debian.sources\"" \
  bookworm "$partial" "deb [trusted=yes] copy://$repo ./" >&2; then
  log "mmdebstrap failed on the packages of ${lock##*/} (its output is above); where apt names" \
    "a dependency as not installable, the lock lacks it: regenerate it with \`just lock-debian\`"
  exit 1
fi
"$python" "$here/debs.py" check "$lock" "$installed"
mv "$partial" "$tarball"
echo "$tarball"
